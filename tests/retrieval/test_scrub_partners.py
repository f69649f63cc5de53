"""Issue 57's mechanisms, each with hostile variants: the other half of a credential pair (a UUID beside a key, a
key id labelled in words, a URL's user, a connection string's account, a signed URL's signing parameters, a
registry's base64 `auth`), a credential named by its context (a provider's log line, a YAML or INI block, a CI
server's XML credentials, a call's argument, an env name in prose), and prefixed tokens (`.` and `-` prefixes,
one-case bodies). Literal in, literal out; and the look-alikes that must stay."""

import base64
import json
import time

import pytest

from retrieval.scrub import scrub

K = "Zq8Lm3Tx9Vb2Nc7Rf4Hk1Wp6Yd5Gs0Ja"  # 32 random-looking base62 characters
L = "bltignoycy4tdoxk2c05uy5yggxrlygw"  # lower-case base36
U = "LFPOQLPBV65UUUIRHFDMKKHYTMS"  # upper-case base32
H = "46af7e8550623a24a314a1fbefc1bc44"  # hex
PW = "Xk9mP2vL4q#Tz8"
ORG = "2a1bf509-5084-419a-a164-747db5f7d5d4"
SIG = "APnZa8vq9fsr17zbLgvjVymcZaXcNxmbAB3dBUXkfd%2Bo"
SAS = f"sv=2022-11-02&ss=b&srt=co&sp=rl&se=2025-03-01T00:00:00Z&st=2024-03-01T00:00:00Z&spr=https&sig={SIG}"


def gone(text: str, *secrets: str) -> bool:
    out = scrub(text).text
    return all(s not in out for s in secrets) and out.count("\n") == text.count("\n")


# 1. the other half of a pair
@pytest.mark.parametrize(
    "text, secrets",
    [
        (f"KARIO_PROJECT_ID={ORG}\nKARIO_API_KEY={K}", [ORG, K]),
        (f"kario:\n  organization: {ORG}\n  api_key: {K}", [ORG, K]),
        (f'{{"orgId": "{ORG}", "apiKey": "{K}"}}', [ORG, K]),
        (f"Workspace: {ORG}\nToken: {K}", [ORG, K]),
        (f"Kario Key ID: BJFIC14TMPSAV5CVZRVH\nKario Session Secret: {K}", ["BJFIC14TMPSAV5CVZRVH", K]),
        (f"The kario key id is BJFIC14TMPSAV5CVZRVH and the secret is {K}.", ["BJFIC14TMPSAV5CVZRVH", K]),
        (
            f"DefaultEndpointsProtocol=https;AccountName=kariostore77;AccountKey={K}{K}==;EndpointSuffix=core.windows.net",
            ["kariostore77"],
        ),
        (f"Server=tcp:kario.db,1433;User ID=svc_kario;Password={PW};", ["svc_kario", PW]),
        (f"Driver={{ODBC Driver 18}};Server=db;Uid=kario_rw;Pwd={PW};", ["kario_rw", PW]),
        (f"DATABASE_URL=postgres://svc_kario:{PW}@db.kario.io:5432/app", ["svc_kario", PW]),
        (f"jdbc:postgresql://db:5432/app?user=kario_etl&password={PW}&ssl=true", ["kario_etl", PW]),
        (f"machine api.kario.io\n  login kario_etl\n  password {PW}", ["kario_etl", PW]),
        (f"https://kariostore77.blob.core.windows.net/backups/db.bak?{SAS}", [SIG, SAS, "sp=rl"]),
        (f'AZURE_SAS_TOKEN="?{SAS}"', [SIG, SAS]),
        (
            f"https://x.s3.amazonaws.com/r.csv?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIA9ZGT1I5H66D7TA64"
            f"%2F20240301%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20240301T000000Z&X-Amz-SignedHeaders=host"
            f"&X-Amz-Signature={H}{H}",
            ["AKIA9ZGT1I5H66D7TA64", H],
        ),
    ],
)
def test_the_other_half_of_a_pair_goes(text, secrets):
    assert gone(text, *secrets)


def test_a_signed_url_keeps_its_host_path_and_other_parameters():
    out = scrub(f"https://kariostore77.blob.core.windows.net/backups/db.bak?restype=blob&{SAS}").text
    assert out == "https://kariostore77.blob.core.windows.net/backups/db.bak?restype=blob&[REDACTED:SIGNED_URL]"


def test_a_signed_query_wrapped_at_an_ampersand_goes_and_keeps_its_lines():
    text = f"url: https://a.blob.core.windows.net/c/f?sv=2022-11-02&sp=rl&se=2025-03-01&\n  spr=https&sig={SIG}\nok"
    out = scrub(text).text
    assert SIG not in out and "sp=rl" not in out and out.count("\n") == 2 and out.endswith("\nok")


AUTH = base64.b64encode(f"ci-bot:{PW}".encode()).decode()
DOCKERCONFIG = base64.b64encode(json.dumps({"auths": {"ghcr.io": {"auth": AUTH}}}).encode()).decode()


@pytest.mark.parametrize(
    "text, secret",
    [
        (f'DOCKER_AUTH_CONFIG: "{{\\"auths\\":{{\\"registry.kario.io\\":{{\\"auth\\":\\"{AUTH}\\"}}}}}}"', AUTH),
        (f"type: kubernetes.io/dockerconfigjson\ndata:\n  .dockerconfigjson: {DOCKERCONFIG}", DOCKERCONFIG),
        (f"//registry.kario.io/:_auth={AUTH}", AUTH),
    ],
)
def test_a_registry_auth_goes_however_it_is_quoted_or_encoded(text, secret):
    assert gone(text, secret)


@pytest.mark.parametrize(
    "text",
    [
        f"request_id: {ORG}\napi_key: {K}",  # a request id beside a key is no half of it
        f"X-Request-Id: {ORG}",
        f"Run {ORG} finished in 3.2 s.",
        f'job = uuid.UUID("{ORG}")',
        "Connect with postgres://localhost:5432/app (no password).",
        "DefaultEndpointsProtocol=https;AccountName=devstoreaccount1;EndpointSuffix=core.windows.net",
        "https://example.com/search?q=signature&sig=short&page=2",
        "https://example.com/a?sv=2022-11-02&sp=rl",  # signing parameters with no signature
        base64.b64encode(json.dumps({"name": "kario", "version": 1, "tags": ["a", "b"]}).encode()).decode(),
    ],
)
def test_pair_look_alikes_stay(text):
    out = scrub(text).text
    assert out.startswith("request_id: " + ORG) if text.startswith("request_id") else out == text


# 2. a credential named by its context
JENKINS = (
    "<com.cloudbees.plugins.credentials.impl.UsernamePasswordCredentialsImpl>\n  <scope>GLOBAL</scope>\n"
    f"  <id>kario-deploy</id>\n  <username>svc_kario</username>\n  <password>{{AQAAABAAAAAQ{K}=}}</password>\n"
    "</com.cloudbees.plugins.credentials.impl.UsernamePasswordCredentialsImpl>"
)


@pytest.mark.parametrize(
    "text, secrets",
    [
        (f"[DEBUG] Using Kario Key={L}", [L]),
        (f"[INFO] kario client init ID=pp0garyih6ix Secret={H}", ["pp0garyih6ix", H]),
        (f"kario:\n  key: {H}\n  secret: {L}", [H, L]),
        (f"[kario]\nkey = {U}\nsecret = {K}", [U, K]),
        (f"Kario key: {L}", [L]),
        (JENKINS, ["svc_kario", K]),
        (f"<StringCredentialsImpl>\n  <id>kario</id>\n  <secret>{H}</secret>\n</StringCredentialsImpl>", [H]),
        (f"<tree-map>\n  <string>KARIO_TOKEN</string>\n  <string>{L}</string>\n</tree-map>", [L]),
        (f"<key>apiToken</key>\n<string>{L}</string>", [L]),
        (f'kario.set_api_key("{L}")', [L]),
        (f"client.authenticate('{H}')", [H]),
        (f'c = new KarioClient("htixr8okps11yghvn6tjw0ev", "{L}");', ["htixr8okps11yghvn6tjw0ev", L]),
        (f"client = Kario::Client.new('{L}')", [L]),
        (f'kario.init("{H}")', [H]),
        (f"Loaded KARIO_KEY from env: {L}", [L]),
        (f'api = Kario("{L}")', [L]),
        (f'c := kario.New("{L}")', [L]),
        (f"const c = new Kario('{L}');", [L]),
        (f'<password encrypted="false">{PW}</password>', [PW]),
        (f'requests.get(url, auth=HTTPBasicAuth("ci", "{L}"))', [L]),
        (f"kario: {L}{H[:8]}", [L]),
        (f"Kario organization: org-{K[:24]}\nKario api key: {K}", [f"org-{K[:24]}", K]),
    ],
)
def test_a_credential_named_by_its_context_goes(text, secrets):
    assert gone(text, *secrets)


@pytest.mark.parametrize(
    "text",
    [
        's3.put_object(Bucket=bucket, Key="uploads/2024/report.txt")',
        "s3.put_object(Bucket=bucket, Key=key_name)",
        "[DEBUG] Using Kario Key=primary region=eu-west-1",
        "key: linux-pip-a05704c2baadfa4337d1fd08500912a01fb0deb40e0f4e047c0333a2153ff4cf",
        "version: 1.2.3-beta.4+build.20240101",
        'client.get("/v1/items/abc123def456")',
        'c = KarioClient("localhost:5432")',
        'logger.setup("pai.hotswap.v2")',
        "Set KARIO_KEY in your shell before the first run.",
        "<key>CFBundleVersion</key>\n<string>1.0.42</string>",
        '    - token: "another"\n      admin: true',
        "login with your company account, then open Settings.",
        f'job = UUID("{ORG}")',
        'doc = db.find(ObjectId("507f1f77bcf86cd799439011"))',
        'err := errors.New("connection refused 42")',
        'const d = new Date("2024-01-01T00:00:00Z");',
        'x = Decimal("12345.678901")',
        "PYTHONPATH=$PWD .venv/bin/python -m pytest",  # a shell variable, not the word pwd
        "export PAI_WRITE_TOKEN=$(openssl rand -hex 24)",
        '"kingfisher-secret-scanner==1.5.0",',  # a version pin
        'author_of("a1b2c3d4e5f6a7b8c9d0e1f2")',
        'hashlib.sha256(b"a1b2c3d4e5f6a7b8c9d0e1f2").hexdigest()',
    ],
)
def test_context_look_alikes_stay(text):
    assert scrub(text).text == text


# 3. prefixed tokens
@pytest.mark.parametrize(
    "token",
    [
        f"tm.{K}",
        f"tm.pt.{K}",
        f"KARI-{U}",
        f"KARI-{H[:24]}-{H}ab",
        f"tmx-{L}",
        f"tmt-na1-{ORG}",
        "amzn.mws.t6i92yjm-0vmo-11ur-5l3p-ikc9zwah96r0",
        f"narkey_{H}{H}-{K[:16]}",
        f"KAR_V2_{U}",
        f"abc_{K[:18]}_{K[18:28]}-{K[:12]}",  # a base64url body: `_` and `-` inside it
        "A3-DDERXI-DUXAJQ-4BVJM-F3IQC-4YY9E-NU85E",  # short parts first, the random ones after
        "pk.eyJ1IjoiZXhhbXBsZSIsImEiOiJjbGFiYzEyMyJ9.abcdEFGH1234xyzQ",  # dotted segments after the body
    ],
)
def test_prefixed_tokens_with_dots_dashes_and_one_case_bodies(token):
    assert gone(f"token: {token}", token)
    assert gone(f"Use {token}.", token)  # at a sentence's end
    assert gone(f'{{"k": "{token}"}}', token)


@pytest.mark.parametrize(
    "text",
    [
        f"session-{ORG}",
        f"web-app-{ORG}",
        f"web-app-{ORG.upper()}",
        f"ID {ORG.upper()} done",
        "my_function_name_for_the_2024_v2_pipeline_step = 3",
        "req_8f7d6c5b4a3e2d1c0b9a8f7e6d5c4b3a",
        f"sha256-{H}{H}",
        '"integrity": "sha512-uM8obKPqNXMsxptfTqxvvzG2fnKxTTdDXmb86JBKvZyN5qsvVk8Ron4vZRCK+ogkGVIW9ch/iMGNKZx4oIRpoA=="',
        f"image: ghcr.io/acme/app@sha256:{H}{H}",
        "from retrieval.scrub.patterns import PATTERNS",
        "see docs.example.com/guides/getting-started-with-the-api",
        "see api.example-service-with-long-name.com/v1 and sentence_transformers.SentenceTransformerModel",
    ],
)
def test_prefixed_look_alikes_stay(text):
    assert scrub(text).text == text


# hostile inputs
def test_nul_bytes_and_line_breaks_keep_their_places():
    text = f"\x00KARIO_PROJECT_ID={ORG}\x00\nKARIO_API_KEY={K}\x00\n[DEBUG] Using Kario Key={L}\x00"
    out = scrub(text).text
    assert out.count("\x00") == 4 and out.count("\n") == 2
    assert all(s not in out for s in (ORG, K, L))


def test_a_blank_line_parts_a_uuid_from_the_key():
    out = scrub(f"project_id: {ORG}\n\nnotes\n\napi_key: {K}").text
    assert ORG in out and K not in out


@pytest.mark.parametrize(
    "text",
    [
        "a=b&" * 50_000 + "sig=" + K,  # a 200 KB query run
        "f(" * 100_000,
        "<a>b</a>" * 50_000,
        "A_KEY " * 50_000,
        "key id " * 50_000,
        f"api_key: {K}\n" + (ORG + " ") * 20_000,
        "login " * 50_000 + f"\npassword {K}",
        "ab." * 50_000 + K,
        "ey" + "A" * 500_000,
        ("Key ID word word: " * 5 + "\n") * 5_000,
    ],
    ids=["query", "calls", "siblings", "env", "prose-id", "uuids", "login", "dotted", "base64", "labels"],
)
def test_huge_hostile_lines_stay_fast_and_whole(text):
    t = time.perf_counter()
    out = scrub(text).text
    assert time.perf_counter() - t < 20  # linear: seconds on a shared 2-core machine, not minutes
    assert out.count("\n") == text.count("\n")
