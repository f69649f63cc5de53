from retrieval.chunking import Chunk, approx_tokens, chunk_code, chunk_markdown, chunk_text, kind_for_suffix

MD = """# Guide

Intro para.

## Install

Run this:

```bash
pip install x

# not a heading
```

Done.

### Sub
Sub text.
## Other
Other text.
"""


def test_markdown_sections_keep_heading_hierarchy_and_lines():
    assert chunk_markdown(MD, 200) == [
        Chunk("# Guide\n\nIntro para.", 1, 3, "Guide", None, 1),
        Chunk(
            "## Install\n\nRun this:\n\n```bash\npip install x\n\n# not a heading\n```\n\nDone.",
            5,
            15,
            "Install",
            "Guide",
            2,
        ),
        Chunk("### Sub\nSub text.", 17, 18, "Sub", "Install", 3),
        Chunk("## Other\nOther text.", 19, 20, "Other", "Guide", 2),
    ]


def test_small_budget_splits_at_paragraphs_but_never_inside_a_fence():
    chunks = chunk_markdown(MD, 8)
    assert Chunk("```bash\npip install x\n\n# not a heading\n```", 9, 13, "Install", "Guide", 2) in chunks
    assert all(not c.text.startswith("# not") for c in chunks)
    lines = MD.split("\n")
    for c in chunks:  # every chunk's text is exactly its line range in the source
        assert "\n".join(lines[c.start_line - 1 : c.end_line]) == c.text


def test_heading_without_body_becomes_parent_only():
    md = "# Top\n## Child\nbody\n"
    assert chunk_markdown(md, 100) == [Chunk("## Child\nbody", 2, 3, "Child", "Top", 2)]


def test_unclosed_fence_stays_one_block():
    md = "# A\n```\ncode\n# no\n"
    assert chunk_markdown(md, 100) == [Chunk("# A\n```\ncode\n# no", 1, 4, "A", None, 1)]


def test_title_heads_markdown_without_headings():
    assert chunk_markdown("just text", 100, title="T") == [Chunk("just text", 1, 1, "T", None, 0)]


def test_code_splits_at_top_level_definitions():
    src = "import os\n\n\ndef a():\n    return 1\n\n\nclass B:\n    x = 1\n\n    def m(self):\n        pass\n"
    # small blocks are packed together; a class is not cut while it fits the budget
    assert [(c.heading, c.start_line, c.end_line) for c in chunk_code(src, 13)] == [
        ("import os", 1, 5),
        ("class B:", 8, 12),
    ]
    # over budget, a block is cut between lines
    assert [(c.heading, c.start_line, c.end_line) for c in chunk_code(src, 8)] == [
        ("import os", 1, 1),
        ("def a():", 4, 5),
        ("class B:", 8, 9),
        ("def m(self):", 11, 12),
    ]


def test_text_packs_paragraphs_and_splits_long_ones():
    text = "para one.\n\npara two.\n\n" + "\n".join(["word " * 10] * 6)
    chunks = chunk_text(text, 20, title="Doc")
    assert chunks[0] == Chunk("para one.\n\npara two.\n\n" + "word " * 10, 1, 5, "Doc", None, 0)
    assert all(c.tokens <= 20 for c in chunks)
    assert [(c.start_line, c.end_line) for c in chunks] == [(1, 5), (6, 6), (7, 7), (8, 8), (9, 9), (10, 10)]


def test_content_hash_depends_on_heading_path():
    a = Chunk("same", 1, 1, "H1")
    assert a.content_hash != Chunk("same", 1, 1, "H2").content_hash
    assert a.content_hash == Chunk("same", 5, 5, "H1").content_hash  # moving lines keeps identity


def test_helpers():
    assert approx_tokens("abcd" * 10) == 10 and approx_tokens("") == 1
    assert [kind_for_suffix(s) for s in (".MD", ".py", ".txt", ".weird")] == ["markdown", "code", "text", "text"]
