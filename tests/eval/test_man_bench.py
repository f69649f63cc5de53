"""The manual-page paraphrase benchmark: a page's NAME line is the query, its DESCRIPTION the relevant passage,
19 distractors mined by the hybrid first stage (`code_bench.mine`)."""

import gzip

import numpy as np
import pytest

from eval.man_bench import build, page, plain

TAR = r""".\" a comment that is not text
.TH TAR 1 "July 13, 2020" "TAR" "GNU TAR Manual"
.SH NAME
tar \- an archiving utility for many files
.SH SYNOPSIS
\fBtar\fR [\fIOPTIONS\fR] [\fIFILE\fR...]
.SH DESCRIPTION
\fBGNU tar\fR saves many files together into a single tape or disk archive,
and can restore individual files from the archive.
.IP \(bu 2
It writes \(aqcompressed\(aq archives when asked \(em with \fB\-z\fR, for instance.
.B Options
follow the mode letter, e.g. \-\-create or \-\-extract, and apply to every member of the archive that is named.
.SH SEE ALSO
gzip(1)
"""


def test_plain_drops_fonts_escapes_and_macros():
    assert plain(r"\fBGNU tar\fR saves \fI\-z\fP files") == "GNU tar saves -z files"
    assert plain(r".B Options") == "Options"
    assert plain(r'.BR "gzip" (1)') == "gzip (1)"
    assert plain(r".IP \(bu 2") == "" and plain(r".TH TAR 1") == "" and plain(r".\" note") == ""
    assert plain(r"a \(bu b \[u00E9] c\c") == "a  b  c"


def test_page_reads_the_name_line_and_the_description(tmp_path):
    f = tmp_path / "tar.1.gz"
    f.write_bytes(gzip.compress(TAR.encode()))
    name, whatis, desc = page(f)
    assert (name, whatis) == ("tar", "an archiving utility for many files")
    assert desc.startswith("GNU tar saves many files together into a single tape or disk archive, and can restore")
    assert "'compressed' archives when asked - with -z" in desc and "Options follow the mode letter" in desc
    assert "gzip(1)" not in desc and "OPTIONS" not in desc  # other sections are not the passage


@pytest.mark.parametrize(
    "raw",
    [
        b"\x1f\x8b\x08\x00garbage",  # a broken gzip
        b"\x00\x01\x02" * 100,  # binary
        TAR.replace(r"tar \- an archiving", "tar an archiving").encode(),  # no 'name - what' line
        TAR.replace("an archiving utility for many files", "archiver").encode(),  # a NAME line too short to ask
        TAR.split(".SH DESCRIPTION")[0].encode(),  # no description
    ],
)
def test_pages_without_both_parts_or_unreadable_are_skipped(tmp_path, raw):
    f = tmp_path / ("x.1.gz" if raw.startswith(b"\x1f\x8b") else "x.1")
    f.write_bytes(raw)
    assert page(f) is None


def _write_pages(man1, n):
    topics = ["compress", "network", "disk", "user", "clock", "print", "image", "sound", "mail", "font"]
    for i in range(n):
        t = topics[i % len(topics)]
        body = (
            f"Tool{i} handles {t} work number {i}. It reads its input, changes the {t} settings the way the"
            f" options say, and writes a report on what it did with {t} item {i} to standard output, one line for"
            f" every change it made, so that a person can read later what happened to the {t} of machine {i}."
        )
        (man1 / f"tool{i}.1").write_text(
            f".TH TOOL{i} 1\n.SH NAME\ntool{i} \\- manage the {t} settings of machine {i}\n.SH DESCRIPTION\n{body}\n"
        )


def test_build_mines_twenty_candidates_with_the_page_among_them(tmp_path, embedder):
    man1 = tmp_path / "man1"
    man1.mkdir()
    _write_pages(man1, 30)
    (man1 / "gcloud-x.1").write_text((man1 / "tool0.1").read_text().replace("tool0", "gcloud-x"))  # skipped
    (man1 / "copy.1").write_text((man1 / "tool1.1").read_text())  # the same text again: one page
    items = build(tmp_path, embedder, queries=4, seed=1)
    assert len(items) == 4
    for it in items:
        ids = [c["id"] for c in it["candidates"]]
        assert len(ids) == 20 == len(set(ids)) and it["relevant_ids"] == [it["qid"]] and it["qid"] in ids
        # the vendor's pages are skipped; of two pages with one text the first (copy.1, by name) stands for both
        assert not any("gcloud" in i or i == "man1/tool1.1" for i in ids)
        assert it["query"].startswith("manage the ") and "tool" not in it["query"]
        # handed over in cosine order, as retrieval hands candidates to a selector
        q = embedder.encode([it["query"]])[0]
        cos = embedder.encode_passages([c["text"] for c in it["candidates"]]) @ q
        assert np.all(np.diff(cos) <= 1e-6)


def test_build_refuses_a_folder_without_enough_pages(tmp_path, embedder):
    (tmp_path / "man1").mkdir()
    _write_pages(tmp_path / "man1", 5)
    with pytest.raises(ValueError, match="usable manual pages"):
        build(tmp_path, embedder, queries=3)
