"""A mechanism corpus for the scrubber (`pai lab bench scrub`): each input holds one or more secrets placed by one of
four mechanisms, and every one of them must go.

- `copies`: a secret found once (by its name, its shape or a provider rule), then a bare second copy of it
  further on (a log line that repeats it, an echo, a note);
- `assignments`: a secret assigned to a credential-ish name in some syntax (a log's unquoted `Key=…`, an
  `export`, YAML, TOML, INI, .env, a registry's `auths` JSON, XML credentials, call arguments, HTTP headers,
  URL userinfo, a variable named after the provider);
- `pairs`: the id half of a credential pair beside its secret (an access key id, a client id, a role id, a
  consumer key): both must go;
- `prefixed`: a token of a short prefix and a machine-made body, for made-up providers (no list of prefixes).

Sources (`source` in each record): `written`, forms and values written here (random values from a seeded
generator, providers with made-up names); `written-untuned`, more such forms written after the rules were;
`written-57` and `written-57-untuned`, the forms of `mechanism_forms.py` (issue 57: pairs, provider `context`,
prefixed; the untuned ones held back, and `written-57-untuned-2` a second such set);
and `gitleaks`, `credsweeper`, `classifinder` (all MIT): the
secrets of the provider corpus (`tests/data/provider_corpus.jsonl`, generated from those scanners' published
rules, see `provider_corpus.py`) in the `copies` and `pairs` forms. Built in memory from a seed: the same
corpus on every run. `negatives` holds look-alikes (digests, request ids, code) that must stay as they are.
"""

from __future__ import annotations

import base64

from . import mechanism_forms
from .credential_values import Values


def _assignments(v: Values) -> list[tuple[str, str, list[str]]]:
    p, k, pw, h = v.provider(), v.b62(), v.password(), v.hex()
    P = p.upper()
    user, auth_pw = "ci-bot", v.password()
    auth = base64.b64encode(f"{user}:{auth_pw}".encode()).decode()
    t = [v.b62(40) for _ in range(12)]
    return [
        ("log line", f"2024-05-01T10:00:00Z INFO {p} client ready Key={k} region=eu-west-1", [k]),
        ("export", f"export {P}_TOKEN={t[0]}", [t[0]]),
        ("yaml", f"{p}:\n  api_key: {t[1]}\n  region: us-east-1", [t[1]]),
        ("toml", f'[{p}]\ntoken = "{t[2]}"\ntimeout = 30', [t[2]]),
        ("ini", f"[{p}]\nhost = db.{p}.io\npassword = {pw}", [pw]),
        (".env provider", f"{P}={t[3]}\nDEBUG=false", [t[3]]),
        (".env hex", f"{P}_KEY={h}", [h]),
        ("docker config", f'{{"auths": {{"registry.{p}.io": {{"auth": "{auth}"}}}}}}', [auth]),
        ("xml element", f"<server>\n  <id>{p}</id>\n  <password>{auth_pw}</password>\n</server>", [auth_pw]),
        (
            "jenkins xml",
            f"<org.jenkinsci.plugins.plaincredentials.impl.StringCredentialsImpl>\n  <id>{p}</id>\n"
            f"  <secret>{{AQAAABAAAAAQ{t[4]}=}}</secret>\n</org.jenkinsci.plugins.plaincredentials.impl.StringCredentialsImpl>",
            [t[4]],
        ),
        ("xml apiKey", f"<config><apiKey>{t[5]}</apiKey></config>", [t[5]]),
        ("xml attribute", f'<datasource url="jdbc:mysql://db/{p}" user="app" password="{pw}"/>', [pw]),
        ("android string", f'<string name="{p}_api_key">{t[6]}</string>', [t[6]]),
        ("keyword argument", f'client = {p}.Client(api_key="{t[7]}")', [t[7]]),
        ("positional argument", f'client = {p}.Client("{t[8]}")', [t[8]]),
        ("js object", f"const c = new {P.title()}Client({{ apiKey: '{t[9]}' }});", [t[9]]),
        ("bearer header", f'curl -H "Authorization: Bearer {t[10]}" https://api.{p}.com/v2/me', [t[10]]),
        ("token header", f"GET /user HTTP/1.1\nAuthorization: token {t[11]}", [t[11]]),
        ("custom header", f"curl -H 'X-{P.title()}-Key: {k}' https://api.{p}.com", [k]),
        ("url userinfo", f"git clone https://deploy:{pw}@git.{p}.io/team/repo.git", [pw]),
        ("url token user", f"git remote add origin https://{t[0]}@github.com/org/repo.git", [t[0]]),
        ("provider variable", f'{p} = "{t[1]}"', [t[1]]),
        ("registry login", f"docker login -u ci -p {pw} registry.{p}.io", [pw]),
        ("registry env", f"REGISTRY_PASSWORD={pw} docker compose up", [pw]),
    ]


def _pairs(v: Values, secret: str | None = None) -> list[tuple[str, str, list[str]]]:
    p = v.provider()
    P = p.upper()
    s = secret or v.b64(40)
    kid, cid, rid, sid = v.key_id(), v.b62(24), v.uuid(), v.uuid()
    return [
        ("aws profile", f"[default]\naws_access_key_id = {kid}\naws_secret_access_key = {s}", [kid, s]),
        ("oauth yaml", f"oauth:\n  client_id: {cid}\n  client_secret: {s}", [cid, s]),
        ("vault approle", f"VAULT_ROLE_ID={rid}\nVAULT_SECRET_ID={sid}", [rid, sid]),
        ("consumer pair", f'consumer_key = "{cid}"\nconsumer_secret = "{s}"', [cid, s]),
        ("json pair", f'{{"accessKeyId": "{kid}", "secretAccessKey": "{s}"}}', [kid, s]),
        ("env pair", f"{P}_KEY_ID={kid}\n{P}_SECRET={s}", [kid, s]),
        ("session", f"key_id: {kid}\nsecret: {s}\nsession_token: {v.b62(60)}", [kid, s]),
    ]


def _copies(v: Values, secret: str | None = None) -> list[tuple[str, str, list[str]]]:
    p = v.provider()
    s = secret or v.b62(32)
    pw = v.password()
    return [
        ("same line", f"token = '{s}' | '{s}'", [s]),
        ("log repeat", f"auth ok password={pw}\nWARN retry 2 with {pw} failed", [pw]),
        ("note later", f"{p.upper()}_API_KEY={s}\n\nLater in the notes: I rotated {s} yesterday.", [s]),
        ("json then url", f'{{"token": "{s}"}}\ncurl "https://api.{p}.com/v1?k={s}"', [s]),
        ("echo", f"export SECRET_KEY='{s}'\necho {s} | base64", [s]),
    ]


def _prefixed(v: Values) -> list[tuple[str, str, list[str]]]:
    t = [v.prefixed() for _ in range(5)]
    return [
        ("prose", f"Use {t[0]} to call the staging API.", [t[0]]),
        ("json value", f'{{"value": "{t[1]}", "enabled": true}}', [t[1]]),
        ("url query", f"https://hooks.example.com/in?access={t[2]}&v=2", [t[2]]),
        ("cli argument", f"tool deploy --with {t[3]} --region eu", [t[3]]),
        ("yaml list", f"tokens:\n  - {t[4]}", [t[4]]),
    ]


def _untuned(v: Values) -> list[tuple[str, str, str, list[str]]]:
    """Forms written after the scrubber's rules were (the first figure on them is the one reported): more
    syntaxes, each mechanism."""
    p, k, pw, rid, kid = v.provider(), v.b62(), v.password(), v.uuid(), v.key_id()
    P = p.upper()
    t = [v.b62(40) for _ in range(6)]
    basic = base64.b64encode(f"bob:{pw}".encode()).decode()
    return [
        ("assignments", "kubernetes", f"kind: Secret\nstringData:\n  {P}_TOKEN: {t[0]}", [t[0]]),
        ("assignments", "powershell", f'$env:{P}_API_KEY = "{t[1]}"', [t[1]]),
        ("assignments", "terraform", f'provider "{p}" {{\n  api_token = "{t[2]}"\n}}', [t[2]]),
        ("assignments", ".npmrc", f"//registry.{p}.io/:_authToken={t[3]}", [t[3]]),
        ("assignments", "properties", f"{p}.apiKey={k}", [k]),
        ("assignments", "connection string", f"Server=db;User Id=sa;Password={pw};", [pw]),
        ("assignments", "go setenv", f'os.Setenv("{P}_SECRET", "{t[4]}")', [t[4]]),
        ("assignments", "netrc", f"machine api.{p}.com login bob password {pw}", [pw]),
        ("assignments", "query string", f"GET /v1/items?apikey={k}&page=2", [k]),
        ("assignments", "cli flag", f"{p}-cli deploy --api-key {t[5]}", [t[5]]),
        ("assignments", "basic header", f"Authorization: Basic {basic}", [basic]),
        ("assignments", "chat", f"here's the {p} key: {k}", [k]),
        ("pairs", "azure env", f"AZURE_CLIENT_ID={rid}\nAZURE_CLIENT_SECRET={t[0]}", [rid, t[0]]),
        ("pairs", "one line", f"ACCESS_KEY={kid} SECRET_KEY={t[1]}", [kid, t[1]]),
        ("pairs", "key and secret", f'{{"key": "{kid}", "secret": "{t[2]}"}}', [kid, t[2]]),
        ("pairs", "user and password", f"username: bob.smith\npassword: {pw}", ["bob.smith", pw]),
        ("copies", "table", f'{{"api_key": "{k}"}}\n\n| env | key |\n|---|---|\n| prod | {k} |', [k]),
        ("copies", "url then log", f"https://bob:{pw}@db.{p}.io/app\nconnect failed for {pw}", [pw]),
        ("prefixed", "dashed prefix", f"set it to {p[:3]}-zen-{k}", [f"{p[:3]}-zen-{k}"]),
        ("prefixed", "upper prefix", f"token {P[:4]}_{k} expires soon", [f"{P[:4]}_{k}"]),
        ("prefixed", "digit prefix", f"use d4x_{t[3]} here", [f"d4x_{t[3]}"]),
    ]


def _negatives(v: Values) -> list[str]:
    return [
        f'commit_sha = "{v.hex(40)}"',
        f"request_id: {v.uuid()}",
        "user: alice\nhome: /home/alice",
        "key = cache_key(prefix, item)",
        f'checksum: "sha256:{v.hex(64)}"',
        "The model's max_tokens = 4096 and temperature = 0.2.",
        "def test_tokenizer_roundtrip_utf8(self):",
        "Authorization: required for every write endpoint.",
        f"<id>{v.uuid()}</id>",
    ]


def build(provider_items: list[dict], seed: int = 0, per_form: int = 4) -> dict:
    """{"inputs": [{source, mechanism, form, text, secrets}], "negatives": [text]}."""
    v = Values(seed)
    v57 = Values(seed + 57)  # the issue-57 forms draw from their own generator: the other sources' values stay
    v58 = Values(seed + 58)  # and the later development forms from theirs
    inputs = []

    def add(source: str, mechanism: str, forms: list[tuple[str, str, list[str]]]) -> None:
        inputs.extend(
            {"source": source, "mechanism": mechanism, "form": f, "text": t, "secrets": s} for f, t, s in forms
        )

    for _ in range(per_form):
        add("written", "assignments", _assignments(v))
        add("written", "pairs", _pairs(v))
        add("written", "copies", _copies(v))
        add("written", "prefixed", _prefixed(v))
        for mechanism, form, text, secrets in _untuned(v):
            add("written-untuned", mechanism, [(form, text, secrets)])
        for mechanism, form, text, secrets in mechanism_forms.development(v57):
            add("written-57", mechanism, [(form, text, secrets)])
        for mechanism, form, text, secrets in mechanism_forms.untuned(v57):
            add("written-57-untuned", mechanism, [(form, text, secrets)])
        for mechanism, form, text, secrets in mechanism_forms.untuned_second(v57):
            add("written-57-untuned-2", mechanism, [(form, text, secrets)])
        for mechanism, form, text, secrets in mechanism_forms.development_more(v58):
            add("written-57", mechanism, [(form, text, secrets)])
    for it in provider_items[::3]:  # a third of the provider secrets: each its own form, copied and paired
        secret = it["secret"]
        add(
            it["source"],
            "copies",
            [(f"{it['syntax']} + bare copy", f"{it['text']}\nlog: retry with {secret} failed", [secret])],
        )
        forms = _pairs(v, secret)
        add(it["source"], "pairs", [forms[len(inputs) % len(forms)]])
    negatives = [n for _ in range(per_form) for n in _negatives(v)]
    negatives += [n for _ in range(per_form) for n in mechanism_forms.negatives(v57)]
    return {"inputs": inputs, "negatives": negatives}
