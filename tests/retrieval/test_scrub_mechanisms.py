"""The scrubber's four mechanisms, each with hostile variants: a known secret everywhere (every copy in the text,
and across the fields of one record), an assignment to a credential-ish name in any syntax, the id half of a
credential pair, and a provider-style prefixed token outside every rule set. Literal in, literal out; and what
must stay (digests, request ids, code, prose)."""

import base64

import pytest

from retrieval.chunking import chunk_document
from retrieval.scrub import scrub, scrub_all

K = "Zq8Lm3Tx9Vb2Nc7Rf4Hk1Wp6Yd5Gs0Ja"  # 32 random-looking base62 characters
K2 = "mB7xQ2vL9pR4tN8kW3zF6hJ1cD5gS0aYeU2iO7"
PW = "Xk9mP2vL4q#Tz8"


def gone(text: str, *secrets: str) -> bool:
    out = scrub(text).text
    return all(s not in out for s in secrets) and out.count("\n") == text.count("\n")


# 1. a known secret everywhere
@pytest.mark.parametrize(
    "text",
    [
        f"token = '{K}' | '{K}'",
        f"auth ok password={PW}\nWARN retry 2 with {PW} failed",
        f"API_KEY={K}\n\nLater in the notes: I rotated {K} yesterday.",
        f'{{"token": "{K}"}}\ncurl "https://api.example.com/v1?k={K}"',
        f"export SECRET_KEY='{K}'\necho {K} | base64",
        f"ghp_{K}AbCd then again ghp_{K}AbCd",
    ],
)
def test_every_copy_of_a_found_secret_goes(text):
    assert gone(text, K, PW)


def test_a_copy_inside_a_longer_word_is_not_a_copy():
    out = scrub(f"password: {PW}\nsee {PW}").text
    assert PW not in out
    assert scrub("password: hunter22\nhunter222 is a username").text.endswith("hunter222 is a username")


def test_a_copy_in_another_chunk_of_the_same_document_goes():
    filler = "\n\n".join(f"## Step {i}\n\nRun the build, check the logs, ship it. " * 3 for i in range(12))
    doc = f"# Deploy\n\napi_key: {K}\n\n{filler}\n\n## Rotation\n\nThe old one, {K}, was revoked.\n"
    raw = chunk_document(doc, "markdown", 64)
    assert sum(K in c.text for c in raw) == 2 and len(raw) > 4  # two copies, in different chunks
    chunks = chunk_document(scrub(doc).text, "markdown", 64)
    assert not any(K in c.text for c in chunks)


def test_a_secret_split_across_a_chunk_boundary_goes():
    body = "\n".join(base64.b64encode(bytes([i] * 48)).decode() for i in range(40))
    key = f"-----BEGIN PRIVATE KEY-----\n{body}\n-----END PRIVATE KEY-----"
    doc = "Notes on the server.\n\n" + "Some text here. " * 40 + "\n\n" + key + "\n\nMore text after. " * 10
    raw = chunk_document(doc, "text", 64)
    assert sum(any(line in c.text for line in body.split("\n")) for c in raw) >= 2  # the key spans chunks
    chunks = chunk_document(scrub(doc).text, "text", 64)
    assert not any(line in c.text for c in chunks for line in body.split("\n"))


def test_fields_scrubbed_together_share_what_they_found():
    user, assistant, none = scrub_all([f"my api_key: {K}", f"ok, I stored {K} for you", None])
    assert none is None and K not in user.text and K not in assistant.text
    assert assistant.counts  # the copy is counted where it was redacted
    alone = scrub_all([f"I stored {K}"])[0]
    assert alone.text == f"I stored {K}"  # nothing found: nothing to chase


# 2. an assignment to a credential-ish name, in any syntax
AUTH = base64.b64encode(f"ci-bot:{PW}".encode()).decode()


@pytest.mark.parametrize(
    "text, secret",
    [
        (f"2024-05-01T10:00:00Z INFO client ready Key={K} region=eu-west-1", K),
        (f"export ZENTRIX_TOKEN={K}", K),
        (f"zentrix:\n  api_key: {K}\n  region: us-east-1", K),
        (f'[zentrix]\ntoken = "{K}"', K),
        (f"[db]\nhost = db.local\npassword = {PW}", PW),
        (f"ZENTRIX={K}\nDEBUG=false", K),
        ("ZENTRIX_KEY=3f9a1c7e5b2d4f60a8e9c1b3d5f7a9c2", "3f9a1c7e5b2d4f60a8e9c1b3d5f7a9c2"),
        (f'{{"auths": {{"registry.example.io": {{"auth": "{AUTH}"}}}}}}', AUTH),
        (f"<server>\n  <id>nexus</id>\n  <password>{PW}</password>\n</server>", PW),
        (f"<com.cloudbees.Creds>\n  <secret>{{AQAAABAAAAAQ{K}=}}</secret>\n</com.cloudbees.Creds>", K),
        (f"<config><apiKey>{K}</apiKey></config>", K),
        (f'<datasource url="jdbc:mysql://db/app" user="app" password="{PW}"/>', PW),
        (f'<string name="zentrix_api_key">{K}</string>', K),
        (f'client = zentrix.Client(api_key="{K}")', K),
        (f'client = zentrix.Client("{K2}")', K2),
        (f"const c = new ZentrixClient({{ apiKey: '{K}' }});", K),
        (f"GET /user HTTP/1.1\nAuthorization: token {K}", K),
        (f"curl -H 'X-Zentrix-Key: {K}' https://api.zentrix.com", K),
        (f"git clone https://deploy:{PW}@git.example.io/team/repo.git", PW),
        (f"git remote add origin https://{K}@github.com/org/repo.git", K),
        (f'stripe = "{K}"', K),
        (f"docker login -u ci -p {PW} registry.example.io", PW),
        (f"REGISTRY_PASSWORD={PW} docker compose up", PW),
    ],
)
def test_assignments_in_any_syntax(text, secret):
    assert gone(text, secret)


# 3. the id half of a credential pair
RID, SID = "1f6b3a52-8c9d-4e7f-a012-3b4c5d6e7f80", "9e8d7c6b-5a49-4382-b716-a5f4e3d2c1b0"


@pytest.mark.parametrize(
    "text, ids",
    [
        (
            f"[default]\naws_access_key_id = QW3ERT7YUI9OPAS2DFGH\naws_secret_access_key = {K2}",
            ["QW3ERT7YUI9OPAS2DFGH"],
        ),
        (f"VAULT_ROLE_ID={RID}\nVAULT_SECRET_ID={SID}", [RID, SID]),
        (f'{{"accessKeyId": "QW3ERT7YUI9OPAS2DFGH", "secretAccessKey": "{K2}"}}', ["QW3ERT7YUI9OPAS2DFGH"]),
        (f"ZENTRIX_KEY_ID=QW3ERT7YUI9OPAS2DFGH\nZENTRIX_SECRET={K}", ["QW3ERT7YUI9OPAS2DFGH"]),
        (f"app_id: 40312877\napp_secret: {K}", ["40312877"]),
        (f"<roleId>{RID}</roleId>\n<secretId>{K}</secretId>", [RID]),
    ],
)
def test_the_id_beside_a_secret_goes(text, ids):
    assert gone(text, *ids)


def test_an_id_far_from_any_secret_stays():
    text = f"app_id: 40312877\nregion: eu\n\nlater:\napp_secret: {K}"  # a blank line: another block
    assert "40312877" in scrub(text).text
    assert scrub(f"request_id: {RID}").text == f"request_id: {RID}"


# 4. a provider-style prefixed token, outside every rule set
@pytest.mark.parametrize("token", ["qvfmw_" + K, "zk-live_" + K2, "abc-" + K, "drm_v1_" + K2])
def test_prefixed_tokens_of_unknown_providers(token):
    assert gone(f"Use {token} to call the staging API.", token)
    assert gone(f"https://hooks.example.com/in?access={token}&v=2", token)


# what must stay
@pytest.mark.parametrize(
    "text",
    [
        'commit_sha = "3f9a1c7e5b2d4f60a8e9c1b3d5f7a9c2e4b6d8f0"',
        f"request_id: {RID}",
        "user: alice\nhome: /home/alice",
        "key = cache_key(prefix, item)",
        "def test_tokenizer_roundtrip_utf8_sentencepiece_model(self):",
        "Authorization: required for every write endpoint.",
        "The IL-6_receptorAlphaChainPrecursor is cleaved.",
        "see https://doi.org/10.7554/eLife.00422.001 and DOI:http://dx.doi.org/10.7554/eLife.00422.001.",
        'name = "MyVeryLongClassNameForTesting2024"',
        "snake_case_function_name_for_the_pipeline_v2 = 3",
    ],
)
def test_look_alikes_stay(text):
    assert scrub(text).text == text


def test_hostile_huge_and_odd_inputs_stay_fast_and_whole():
    """Many pairs and copies in one large text, NULs and look-alike names: linear enough, line count kept."""
    import time

    lines = [f"key_id: ID{i:08d}\npassword: Pw{i:06d}#x\nnote: Pw{i:06d}#x again\n" for i in range(3000)]
    text = "\n".join(lines) + "\x00" + "a_b-" * 50_000 + '"' + "Ab1" * 20_000 + '"'
    t = time.perf_counter()
    out = scrub(text).text
    assert time.perf_counter() - t < 30
    assert out.count("\n") == text.count("\n")
    assert "ID00000007" not in out and "Pw000007#x" not in out
    assert scrub("password\x00=\x00hunter22").text.count("\x00") == 2
    assert scrub("passwordless_key_identifier = 3").text == "passwordless_key_identifier = 3"
