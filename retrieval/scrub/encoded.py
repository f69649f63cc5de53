"""Credentials carried in an encoding: a signed URL's query string (an Azure shared access signature's `sv=…&sig=…`,
a presigned S3 or GCS URL's `X-Amz-*` / `X-Goog-*`, a CloudFront `Signature`/`Key-Pair-Id`), a registry's base64
`auth` of `user:password` however the JSON around it is quoted, and base64 JSON that holds credentials (a
Kubernetes `.dockerconfigjson`, a service account key)."""

from __future__ import annotations

import base64
import binascii
import re
from collections import Counter

from .patterns import Pattern
from .values import REDACTED, basic_credentials, marker

# the parameters that sign a URL (and the expiry and scope they sign): the run of them goes as one
_SIGNING = re.compile(
    r"(?i)(?:sv|ss|srt|sp|se|st|spr|sr|si|sip|sig|skoid|sktid|skt|ske|sks|skv|sdd|ses|signature|expires|"
    r"key-pair-id|policy|awsaccesskeyid|googleaccessid|ossaccesskeyid|x-(?:amz|goog|oss)-[\w-]+)"
)
_SIGNATURE = {"sig", "signature", "x-amz-signature", "x-goog-signature", "x-oss-signature"}
_PARAM = re.compile(r"(?P<name>[\w.%-]+)=(?P<value>[^&\s\"'#<>;]*)")
_QUERY = re.compile(
    r"[\w.%-]+=[^&\s\"'#<>;]*(?:&(?:amp;)?(?:\n[ \t]*)?[\w.%-]+=[^&\s\"'#<>;]*)+"
)  # wrapped at a `&` too


def signed_queries(text: str, counts: Counter, found: dict[str, str] | None = None) -> str:
    """The signing parameters of each query string that carries a signature (16+ characters, not a word), from
    the first to the last, become one `[REDACTED:SIGNED_URL]`: the signature, and what it was made with."""
    low = text.lower() if "=" in text else ""
    if "sig=" not in low and "signature=" not in low:  # `sig=`, `Signature=`, `X-Amz-Signature=`
        return text
    out, pos = [], 0
    for q in _QUERY.finditer(text):
        params = list(_PARAM.finditer(q.group(0)))
        if not any(
            p.group("name").lower() in _SIGNATURE and len(p.group("value")) >= 16 and not p.group("value").isalpha()
            for p in params
        ):
            continue
        signing = [p for p in params if _SIGNING.fullmatch(p.group("name"))]
        a, b = q.start() + signing[0].start(), q.start() + signing[-1].end()
        secret = text[a:b]
        if REDACTED.fullmatch(secret):
            continue
        out.append(text[pos:a] + marker("SIGNED_URL", secret))
        counts["SIGNED_URL"] += 1
        if found is not None:
            found.setdefault(secret, "SIGNED_URL")
        pos = b
    if not out:
        return text
    out.append(text[pos:])
    return "".join(out)


_CREDENTIAL_KEY = re.compile(
    r'(?i)"(?:auths?|password|passwd|private_key|client_secret|secret|token|access_token|refresh_token|identitytoken)"\s*:'
)


def _credential_json(m: re.Match[str]) -> str | None:
    """Base64 of JSON text with a credential's key in it."""
    value = m.group("value")
    try:
        raw = base64.b64decode(value + "=" * (-len(value) % 4), validate=True).decode("utf-8")
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return None
    return "ENCODED_CREDENTIALS" if _CREDENTIAL_KEY.search(raw) else None


ENCODED_PATTERNS: tuple[Pattern, ...] = (
    Pattern(  # "auth": "<base64 user:password>", \"auth\":\"…\" inside a quoted JSON, auth: …, _auth=…
        "BASIC_AUTH",
        re.compile(
            r"(?i)(?<![a-z0-9])_?auth\\?[\"']?[ \t]*[:=][ \t]*\\?[\"']?(?P<value>[A-Za-z0-9+/]{12,}={0,2})(?![A-Za-z0-9+/=])"
        ),
        "value",
        lambda m: "BASIC_AUTH" if basic_credentials(m.group("value")) else None,
        needles=("auth",),
    ),
    Pattern(  # base64 of `{"…` or `{\n…` (eyJ…, ewo…) that decodes to JSON holding a credential
        "ENCODED_CREDENTIALS",
        re.compile(r"(?<![A-Za-z0-9+/])(?P<value>e[wy][A-Za-z0-9+/]{38,}={0,2})(?![A-Za-z0-9+/=.])"),
        "value",
        _credential_json,
        needles=("ey", "ew"),
    ),
)
