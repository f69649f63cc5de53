"""Scoped tokens (serving/grants.py): what a grant may read and write, and a tokens file that does not read is one
line naming the entry, never the token."""

import pytest

from serving.grants import OWNER, Grant, grant_for, tokens

GOOD = "g" * 20


def test_a_grant_reads_what_it_may_write_and_its_shared_scopes():
    g = Grant("alice/notes", read=("team/shared",), write=("alice/*",), shared=("team/shared", "bob"))
    assert g.may_read("alice/notes") and g.may_read("alice/x/y") and g.may_read("team/shared")
    assert not g.may_read("bob") and not g.may_write("team/shared") and g.may_write("alice")
    assert g.reading("alice/notes") == ["alice/notes", "team/shared"]  # bob is not readable: never added
    assert OWNER.may_write("anything/at/all") and not OWNER.scoped


def test_tokens_come_from_the_file_and_the_environment(tmp_path, monkeypatch):
    f = tmp_path / "tokens.yaml"
    f.write_text(f"- token: {GOOD}\n  default: alice\n  write: ['alice/*']\n")
    monkeypatch.setenv("PAI_TOKENS_FILE", str(f))
    monkeypatch.setenv("PAI_READ_TOKEN", "r-token")
    grant = grant_for(f"Bearer {GOOD}".encode())
    assert grant.default == "alice" and grant.scoped and grant.may_write("alice/x")
    assert grant_for(b"Bearer r-token").may_read("bob") and not grant_for(b"Bearer r-token").writes
    assert grant_for(b"Bearer nope") is None and grant_for(b"Bearer caf\xe9") is None
    f.write_text(f"- token: {GOOD}\n  default: bob\n  read: ['bob']\n")  # read again when it changes
    assert grant_for(f"Bearer {GOOD}".encode()).default == "bob"


@pytest.mark.parametrize(
    "entries, why",
    [
        ("{}", "a list of token entries"),
        ("- token: short\n", "at least 16"),
        (f"- token: {GOOD}\n  read: ['..']\n", "entry 1: read: scope"),
        (f"- token: {GOOD}\n  write: ['a*']\n", "entry 1: write: scope"),
        (f"- token: {GOOD}\n  default: bob\n  read: ['alice']\n", "is not among the scopes it may read"),
        (f"- token: {GOOD}\n  shared: ['team/*']\n", "entry 1: shared: scope"),
        (f"- token: {GOOD}\n  default: 'x\\0y'\n", "entry 1: default: scope"),
        (f"- token: {GOOD}\n  read: 'alice'\n", "a list of scope patterns"),
        (f"- token: {GOOD}\n  reed: ['alice']\n", "entry 1: a mapping of"),
        (f"- token: {GOOD}\n  admin: true\n- token: {GOOD}\n  admin: true\n", "a token appears twice"),
        ("- token: [unclosed\n", "PAI_TOKENS_FILE"),
    ],
)
def test_a_tokens_file_that_does_not_read_is_one_line_without_the_token(tmp_path, monkeypatch, entries, why):
    f = tmp_path / "tokens.yaml"
    f.write_text(entries)
    monkeypatch.setenv("PAI_TOKENS_FILE", str(f))
    with pytest.raises(ValueError) as e:
        tokens()
    assert why in str(e.value) and "\n" not in str(e.value) and GOOD not in str(e.value), str(e.value)
