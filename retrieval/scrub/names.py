"""What a variable or field name says about its value: PASSWORD, API_KEY, TOKEN, SECRET, CLIENT_ID or nothing."""

from __future__ import annotations

import re

# words of a name (split at _ . - and camelCase) that make it secret-ish
_PASSWORD_WORDS = {"password", "passwd", "passphrase", "passcode", "pass", "pwd", "pw", "pword"}
_TOKEN_WORDS = {"token", "apitoken", "authtoken", "accesstoken", "refreshtoken"}
_SECRET_WORDS = {"secret", "credential", "credentials", "creds", "privatekey"}
_KEY_QUALIFIERS = {
    "api",
    "insert",
    "ingest",
    "admin",
    "deploy",
    "sdk",
    "access",
    "secret",
    "private",
    "signing",
    "encryption",
    "master",
    "client",
    "app",
    "consumer",
    "license",
    "account",
    "auth",
    "service",
    "subscription",
    "webhook",
    "shared",
}
# the name's last word says it is about the secret, not the secret itself
_NOT_THE_VALUE = {
    "type",
    "types",
    "length",
    "len",
    "count",
    "file",
    "files",
    "path",
    "name",
    "names",
    "url",
    "uri",
    "endpoint",
    "expiry",
    "expires",
    "expiration",
    "ttl",
    "limit",
    "max",
    "min",
    "size",
    "budget",
    "header",
    "field",
    "env",
    "policy",
    "prompt",
    "reset",
    "hint",
    "format",
    "mode",
    "regex",
    "pattern",
    "kind",
    "version",
    "dir",
    "provider",
    "manager",
    "store",
    "ref",
    "arn",
    "location",
    "label",
    "description",
    "help",
    "required",
    "enabled",
    "rotation",
    "strength",
    "hash",
    "class",
}


# words of a name whose random-looking value is a digest, an id or a nonce, not a credential
_NOT_A_CREDENTIAL = {
    "hash",
    "sha",
    "sha1",
    "sha256",
    "sha512",
    "md5",
    "digest",
    "checksum",
    "crc",
    "sum",
    "commit",
    "rev",
    "revision",
    "etag",
    "nonce",
    "salt",
    "iv",
    "id",
    "ids",
    "uuid",
    "guid",
    "uid",
    "fingerprint",
    "integrity",
    "signature",
    "sig",
    "color",
    "colour",
    "tag",
    "build",
    "sequence",
    "seq",
    "dna",
    "rna",
    "peptide",
    "primer",
    "accession",
    "doi",
    "isbn",
    "test",
    "example",
    "sample",
    "dummy",
    "fake",
    "mock",
}
# a name that says "key" or "auth" without saying which: its value counts only where it reads as random
WEAK_WORDS = {"key", "keys", "auth", "authorization", "apikey", "pat", "bearer", "cred", "login"}


def name_words(name: str) -> list[str]:
    """The words of a name, lower-case: `AWS_ACCESS_KEY_ID`, `accessKeyId` -> ["aws"/"access", "key", "id"]."""
    return [w.lower() for w in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+", name)]


def may_name_a_credential(name: str) -> bool:
    """A name (a provider's, `stripe`, `SENDGRID`) that does not say its value is a digest, an id or a test value."""
    words = name_words(name)
    return bool(words) and words[-1] not in _NOT_THE_VALUE and not _NOT_A_CREDENTIAL & set(words)


def secret_kind(name: str) -> str | None:
    """PASSWORD / API_KEY / TOKEN / SECRET when a variable or field name says its value is a secret."""
    words = name_words(name)
    if not words or words[-1] in _NOT_THE_VALUE:
        return None
    joined = "".join(words)
    if any(w in _PASSWORD_WORDS for w in words) or any(p in joined for p in ("password", "passwd", "passphrase")):
        return "PASSWORD"
    if (
        any(w in ("key", "keys") and i > 0 and words[i - 1] in _KEY_QUALIFIERS for i, w in enumerate(words))
        or "apikey" in joined
        or "accesskey" in joined
    ):
        return "API_KEY" if "private" not in words else "SECRET"
    if any(w in _TOKEN_WORDS for w in words) or joined.endswith("token"):
        return "TOKEN"
    if joined.endswith("clientid"):  # an OAuth client id: not secret alone, but half of a credential pair
        return "CLIENT_ID"
    if any(w in _SECRET_WORDS for w in words) or joined.endswith("secret") or "privatekey" in joined:
        return "SECRET"
    return None
