import string
import subprocess
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.query import staging
from retrieval.query.search import Candidate, SearchResult


def cand(rank, score, text="text", source="/repo/docs/a.md", **kw):
    base = dict(
        chunk_id=rank * 10,
        source=source,
        heading="Setup",
        parent_heading="Guide",
        start_line=3,
        end_line=9,
        text=text,
        content_hash="ab" * 32,
        score=score,
        tokens=len(text) // 4 + 1,
        vector_rank=rank,
        keyword_rank=None,
    )
    base.update(kw)
    return Candidate(rank=rank, **base)


def result():
    cands = [cand(1, 0.81, "# Title\n\n> quoted\n\n```\ncode\n```"), cand(2, 0.5, "two"), cand(3, 0.1, "low")]
    return SearchResult("how to set up?", cands, 0.2, cands[:2])


NOW = datetime(2026, 11, 30, 10, 0, 0, tzinfo=UTC)


def test_render_shows_what_a_person_reads():
    sf = staging.from_result(result(), query_id="q1", now=NOW)
    md = staging.render(sf, display_root="/repo")
    assert md.startswith("# Query: how to set up?\n")
    assert "## 1. **docs/a.md** (0.810)\n*lines 3–9* · Guide › Setup\n" in md
    assert "> # Title\n>\n> > quoted\n" in md
    assert "**docs/a.md** (0.100)" not in md  # below threshold: not listed
    assert md.rstrip().endswith("*1 chunks below threshold — never enter context*")


def test_render_dates_each_candidate_and_marks_the_newer_of_two_near_ones():
    old = cand(1, 0.8, "Q3 EMEA: 4.2 M", date="2026-10-03T09:00:00+00:00")
    new = cand(2, 0.7, "Q3 EMEA: 4.5 M", date="2026-10-10T09:00:00+00:00", near_chunk_id=old.chunk_id)
    sf = staging.from_result(SearchResult("q3 emea?", [old, new], 0.2), query_id="q1", now=NOW)
    md = staging.render(sf, display_root="/repo")
    assert "*lines 3–9* · Guide › Setup · written 2026-10-03\n" in md
    assert "*lines 3–9* · Guide › Setup · written 2026-10-10 · newer than #1\n" in md
    assert staging.parse(md) == sf


def test_round_trip_through_a_file(tmp_path):
    sf = staging.from_result(result(), query_id="q1", now=NOW)
    path = staging.write(sf, tmp_path)
    assert path.parent.name == "2026-11-30" and path.name == "100000-how-to-set-up-q1.md"
    assert staging.read(path) == sf
    assert not list(tmp_path.rglob("*.tmp"))


text_st = st.text(alphabet=string.printable + "äß→—`*#>-", max_size=300)


@settings(max_examples=200, deadline=None)
@given(
    query=text_st.filter(lambda q: q.strip()),
    texts=st.lists(text_st, min_size=0, max_size=5),
    heading=st.none() | text_st,
    source=text_st.filter(bool),
    below=st.integers(0, 20),
)
def test_parse_render_is_exact_for_any_text(query, texts, heading, source, below):
    cands = tuple(cand(i + 1, 1.0 / (i + 2), t, source=source, heading=heading) for i, t in enumerate(texts))
    sf = staging.StagingFile("qid", query, NOW.isoformat(), 0.2, cands, below)
    assert staging.parse(staging.render(sf)) == sf


def test_not_a_staging_file():
    with pytest.raises(staging.StagingParseError):
        staging.parse("# just markdown\n")


def test_commit_batch_makes_one_commit_per_batch(tmp_path):
    paths = [staging.write(staging.from_result(result(), query_id=f"q{i}", now=NOW), tmp_path) for i in range(3)]
    sha = staging.commit_batch(tmp_path, paths, "batch 1")
    log = subprocess.run(
        ["git", "-C", str(tmp_path), "log", "--format=%H %s", "--name-only"], capture_output=True, text=True, check=True
    ).stdout
    assert log.startswith(f"{sha} batch 1") and log.count(".md") == 3
