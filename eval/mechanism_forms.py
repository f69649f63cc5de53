"""Forms for three of the mechanism corpus's mechanisms as issue 57 names what is still missed (`pai lab bench scrub`):

- `pairs`: the other half of a credential pair: an organisation or project id (a UUID) beside an API key, a key
  id beside a session secret, the account name in a storage connection string, the user in a database URL or
  an ADO connection string, the signing parameters of a signed URL, a registry's base64 `auth` in a CI config;
- `context`: a credential named by its context: a log line naming the provider and printing `Key=value`
  unquoted, a YAML or INI block under a provider's name, a CI server's XML credential file, a token passed
  as a function argument;
- `prefixed`: a token of a prefix and a random body where the prefix ends in `.` or `-`, an upper-case prefix,
  a body of one letter case, a short prefix before a long body.

`development` is what the rules were shaped on (source `written-57`); `untuned` was written before any rule was
changed and held back (source `written-57-untuned`): its first figure is the one reported. Providers are made
up; values come from the corpus's seeded generator (`credential_values.Values`).
"""

from __future__ import annotations

import base64
from urllib.parse import quote

from .credential_values import Values

Form = tuple[str, str, str, list[str]]  # (mechanism, form, text, secrets)


def _sas(v: Values) -> tuple[str, str]:
    """An Azure-style shared access signature's query string and its `sig`, URL-encoded."""
    sig = quote(v.b64(44), safe="")
    query = f"sv=2022-11-02&ss=b&srt=co&sp=rl&se=2025-03-01T00:00:00Z&st=2024-03-01T00:00:00Z&spr=https&sig={sig}"
    return query, sig


def development(v: Values) -> list[Form]:
    p, uid, kid = v.provider(), v.uuid(), v.key_id()
    P, T = p.upper(), p.title()
    key, s, pw, user = v.b62(40), v.b62(40), v.password(), f"svc_{p}"
    acct = f"{p}store{v.r.randint(10, 99)}"
    query, sig = _sas(v)
    akid = "AKIA" + v.key_id()[:16]
    amz_sig = v.hex(64)
    auth = base64.b64encode(f"ci-{p}:{pw}".encode()).decode()
    l36, u32, h24 = v.b36(32), v.upper(27), v.hex(24)
    pre = "".join(v.r.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(2))
    h40, b36, b43, cid = v.hex(40), v.b36(24), v.b62(43), v.b36(12)
    segments, tail = f"{P[:4]}-{h24}-{v.hex(34)}", f"{p[:3]}key_{v.hex(64)}-{v.b62(16)}"
    return [
        ("pairs", "project id env", f"{P}_PROJECT_ID={uid}\n{P}_API_KEY={key}", [uid, key]),
        ("pairs", "organization yaml", f"{p}:\n  organization: {uid}\n  api_key: {key}", [uid, key]),
        ("pairs", "org json", f'{{"orgId": "{uid}", "apiKey": "{key}"}}', [uid, key]),
        ("pairs", "labels with spaces", f"Project ID: {uid}\nAPI Key: {key}", [uid, key]),
        ("pairs", "key id and session secret", f"{T} Key ID: {kid}\n{T} Session Secret: {s}", [kid, s]),
        (
            "pairs",
            "storage connection string",
            f"DefaultEndpointsProtocol=https;AccountName={acct};AccountKey={v.b64(88)}==;EndpointSuffix=core.windows.net",
            [acct],
        ),
        ("pairs", "database url user", f"DATABASE_URL=postgres://{user}:{pw}@db.{p}.io:5432/app", [user, pw]),
        ("pairs", "mysql url in prose", f"connect with mysql://{user}:{pw}@10.0.3.7/{p}", [user, pw]),
        (
            "pairs",
            "ado connection string",
            f"Server=tcp:{p}.database.windows.net,1433;Database=app;User ID={user};Password={pw};",
            [user, pw],
        ),
        ("pairs", "sas url", f"https://{acct}.blob.core.windows.net/backups/db.bak?{query}", [sig, query]),
        (
            "pairs",
            "presigned s3 url",
            f"https://{p}-exports.s3.amazonaws.com/r.csv?X-Amz-Algorithm=AWS4-HMAC-SHA256"
            f"&X-Amz-Credential={akid}%2F20240301%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20240301T000000Z"
            f"&X-Amz-Expires=3600&X-Amz-SignedHeaders=host&X-Amz-Signature={amz_sig}",
            [akid, amz_sig],
        ),
        (
            "pairs",
            "escaped registry auth",
            f'DOCKER_AUTH_CONFIG: "{{\\"auths\\":{{\\"registry.{p}.io\\":{{\\"auth\\":\\"{auth}\\"}}}}}}"',
            [auth],
        ),
        ("context", "log Key=", f"[DEBUG] Using {T} Key={l36}", [l36]),
        ("context", "log ID= Secret=", f"[INFO] {p} client init ID={cid} Secret={h24}", [cid, h24]),
        ("context", "yaml under provider", f"{p}:\n  key: {h24}\n  secret: {l36}", [h24, l36]),
        ("context", "ini under provider", f"[{p}]\nkey = {u32}\nsecret = {s}", [u32, s]),
        ("context", "provider key inline", f"{T} key: {l36}", [l36]),
        (
            "context",
            "jenkins username password",
            "<com.cloudbees.plugins.credentials.impl.UsernamePasswordCredentialsImpl>\n  <scope>GLOBAL</scope>\n"
            f"  <id>{p}-deploy</id>\n  <description>deploy</description>\n  <username>{user}</username>\n"
            f"  <password>{{AQAAABAAAAAQ{key}=}}</password>\n"
            "</com.cloudbees.plugins.credentials.impl.UsernamePasswordCredentialsImpl>",
            [user, key],
        ),
        (
            "context",
            "jenkins string credentials",
            "<org.jenkinsci.plugins.plaincredentials.impl.StringCredentialsImpl>\n"
            f"  <id>{p}-token</id>\n  <secret>{h24}</secret>\n"
            "</org.jenkinsci.plugins.plaincredentials.impl.StringCredentialsImpl>",
            [h24],
        ),
        ("context", "setter argument", f'{p}.set_api_key("{l36}")', [l36]),
        ("context", "authenticate argument", f"client.authenticate('{h40}')", [h40]),
        ("context", "constructor two args", f'c = new {T}Client("{b36}", "{l36}");', [b36, l36]),
        ("prefixed", "dotted prefix", f"token: {pre}.{key}", [f"{pre}.{key}"]),
        ("prefixed", "two dotted prefixes", f"use {pre}.pt.{b43} now", [f"{pre}.pt.{b43}"]),
        ("prefixed", "upper dash prefix", f"{P[:4]}-{u32}", [f"{P[:4]}-{u32}"]),
        ("prefixed", "hex segments", f"postman: {segments}", [segments]),
        ("prefixed", "lower-case body", f"sent with {pre}x-{l36}", [f"{pre}x-{l36}"]),
        ("prefixed", "prefix and uuid", f"{pre}t-na1-{uid}", [f"{pre}t-na1-{uid}"]),
        ("prefixed", "hex then b62 tail", f"SMTP relay {tail}", [tail]),
    ]


def untuned(v: Values) -> list[Form]:
    """Written before any rule for these mechanisms changed, and never shaped on: more syntaxes of each."""
    p, tid, cid, wid = v.provider(), v.uuid(), v.uuid(), v.uuid()
    P, T = p.upper(), p.title()
    key, s, pw, user = v.b62(40), v.b62(32), v.password(), f"{p}_rw"
    kid, acct, bucket = v.key_id(), f"{p}data{v.r.randint(100, 999)}", f"{p}-reports"
    query, sig = _sas(v)
    goog_sig = v.hex(128)
    sak = v.b64(44)
    docker_json = f'{{"auths":{{"ghcr.io":{{"auth":"{base64.b64encode(f"{user}:{pw}".encode()).decode()}"}}}}}}'
    dockerconfig = base64.b64encode(docker_json.encode()).decode()
    l40, u24, h32, l32, x30, c20 = v.b36(40), v.upper(24), v.hex(32), v.b36(32), v.b62(30), v.b36(20)
    pre = "".join(v.r.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(3))
    dotted, upper_us, lower_dot = f"{pre}.v2.{v.b62(48)}", f"{P[:3]}_{v.upper(30)}", f"{pre}.{v.b36(40)}"
    mixed, seg, two = f"{P[:4]}-{v.b36(36)}", f"{pre}-{v.hex(8)}-{v.hex(32)}", f"{pre[:2]}_{v.b62(48)}"
    return [
        (
            "pairs",
            "service principal json",
            f'{{\n  "tenantId": "{tid}",\n  "clientId": "{cid}",\n  "clientSecret": "{s}"\n}}',
            [tid, cid, s],
        ),
        ("pairs", "workspace label", f"Workspace: {wid}\nToken: {key}", [wid, key]),
        ("pairs", "org in toml", f'[{p}]\norg = "{tid}"\napi_key = "{key}"', [tid, key]),
        ("pairs", "redis url", f"REDIS_URL=rediss://{user}:{pw}@cache.{p}.io:6380/0", [user, pw]),
        (
            "pairs",
            "mongodb srv",
            f'client = MongoClient("mongodb+srv://{user}:{pw}@cluster0.{p}.mongodb.net/?retryWrites=true")',
            [user, pw],
        ),
        (
            "pairs",
            "odbc string",
            f"Driver={{ODBC Driver 18 for SQL Server}};Server={p}.db;Uid={user};Pwd={pw};",
            [user, pw],
        ),
        (
            "pairs",
            "service bus string",
            f"Endpoint=sb://{p}.servicebus.windows.net/;SharedAccessKeyName={p}-sender;SharedAccessKey={sak}",
            [f"{p}-sender", sak],
        ),
        (
            "pairs",
            "appsettings storage",
            f'"Storage": "DefaultEndpointsProtocol=https;AccountName={acct};AccountKey={v.b64(88)}==;"',
            [acct],
        ),
        ("pairs", "sas token alone", f'AZURE_SAS_TOKEN="?{query}"', [sig, query]),
        (
            "pairs",
            "gcs signed url",
            f"https://storage.googleapis.com/{bucket}/q1.pdf?X-Goog-Algorithm=GOOG4-RSA-SHA256"
            f"&X-Goog-Credential=exporter%40{p}.iam.gserviceaccount.com%2F20240101%2Fauto%2Fstorage%2Fgoog4_request"
            f"&X-Goog-Date=20240101T000000Z&X-Goog-Expires=900&X-Goog-SignedHeaders=host&X-Goog-Signature={goog_sig}",
            [goog_sig],
        ),
        ("pairs", "key id and secret in a sentence", f"The {p} key id is {kid} and the secret is {s}.", [kid, s]),
        (
            "pairs",
            "kubernetes dockerconfigjson",
            f"type: kubernetes.io/dockerconfigjson\ndata:\n  .dockerconfigjson: {dockerconfig}",
            [dockerconfig],
        ),
        (
            "context",
            "log with logger name",
            f"2024-03-05 12:00:01,123 DEBUG [{p}.client] Initialising with Token={l40}",
            [l40],
        ),
        ("context", "log ClientID= Secret=", f"[TRACE] {T} auth: ClientID={c20} Secret={h32}", [c20, h32]),
        ("context", "nested yaml", f"services:\n  {p}:\n    url: https://api.{p}.io\n    token: {l32}", [l32]),
        ("context", "ini section with suffix", f"[{p}-prod]\nregion = eu\nkey = {u24}", [u24]),
        (
            "context",
            "jenkins ssh key passphrase",
            "<com.cloudbees.jenkins.plugins.sshcredentials.impl.BasicSSHUserPrivateKey>\n"
            f"  <id>{p}-ssh</id>\n  <username>git</username>\n  <passphrase>{{AQAAABAAAAAg{x30}=}}</passphrase>\n"
            "</com.cloudbees.jenkins.plugins.sshcredentials.impl.BasicSSHUserPrivateKey>",
            [x30],
        ),
        (
            "context",
            "jenkins api token",
            f"<jenkins.security.ApiTokenProperty>\n  <apiToken>{h32}</apiToken>\n</jenkins.security.ApiTokenProperty>",
            [h32],
        ),
        ("context", "init positional hex", f'{p}.init("{h32}")', [h32]),
        ("context", "java constructor", f'{T}Client client = new {T}Client("{l32}");', [l32]),
        ("context", "js login", f"await {p}.login('{x30}')", [x30]),
        ("context", "provider env echo", f"Loaded {P}_KEY from env: {l32}", [l32]),
        ("prefixed", "dotted with version", f"export X={dotted}", [dotted]),
        ("prefixed", "upper underscore", f"{upper_us} is the relay key", [upper_us]),
        ("prefixed", "lower dotted", f"paste {lower_dot} into the form", [lower_dot]),
        ("prefixed", "upper prefix lower body", f"key {mixed}", [mixed]),
        ("prefixed", "hex segments", f"webhook signing: {seg}", [seg]),
        ("prefixed", "two-letter prefix", f"({two})", [two]),
    ]


def negatives(v: Values) -> list[str]:
    """Look-alikes these mechanisms must leave: request and trace ids, UUIDs alone in prose and code, lockfile
    and image digests, cache keys, versions."""
    uid, h40 = v.uuid(), v.hex(40)
    sri = base64.b64encode(bytes(v.r.getrandbits(8) for _ in range(64))).decode()
    return [
        f"X-Request-Id: {uid}",
        f"trace_id={v.hex(32)} span_id={v.hex(16)}",
        f'"integrity": "sha512-{sri}"',
        f'resolved "https://registry.yarnpkg.com/lodash/-/lodash-4.17.21.tgz#{h40}"',
        f"image: ghcr.io/acme/app@sha256:{v.hex(64)}",
        f"requests==2.31.0 --hash=sha256:{v.hex(64)}",
        f"Run {uid} finished in 3.2 s.",
        f'job = uuid.UUID("{uid}")',
        f"[INFO] request {v.uuid()} took 12 ms",
        f"git checkout {h40}",
        f"key: linux-pip-{v.hex(64)}",
        "version: 1.2.3-beta.4+build.20240101",
    ]


def untuned_second(v: Values) -> list[Form]:
    """A second held-back set, written after the first one had been looked at (and the rules fixed on it)."""
    p, sub = v.provider(), v.uuid()
    P, T = p.upper(), p.title()
    s, pw, user, kid = v.b62(40), v.password(), f"{p}_etl", v.key_id()
    cf_sig, cf_kid = v.b62(60).replace("x", "~").replace("Q", "-"), "K" + v.upper(13)
    l32, h40, l40 = v.b36(32), v.hex(40), v.b36(40)
    pre = "".join(v.r.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(3))
    dotted, versioned = f"{pre}.{v.b36(48)}", f"{P[:3]}_V2_{v.upper(32)}"
    return [
        ("pairs", "netrc login", f"machine api.{p}.io\n  login {user}\n  password {pw}", [user, pw]),
        ("pairs", "snowflake url", f"snowflake://{user}:{pw}@{p}-xy12345/analytics/public", [user, pw]),
        (
            "pairs",
            "jdbc parameters",
            f"jdbc:postgresql://db.{p}.io:5432/app?user={user}&password={pw}&ssl=true",
            [user, pw],
        ),
        ("pairs", "python dict", f'creds = {{"access_key": "{kid}", "secret_key": "{s}"}}', [kid, s]),
        (
            "pairs",
            "cloudfront signed url",
            f"https://d111abcdef8.cloudfront.net/v.mp4?Expires=1700000000&Signature={cf_sig}&Key-Pair-Id={cf_kid}",
            [cf_sig, cf_kid],
        ),
        ("pairs", "subscription and secret", f"ARM_SUBSCRIPTION_ID={sub}\nARM_CLIENT_SECRET={s}", [sub, s]),
        ("context", "log token rejected", f"[{P}] token {l40} rejected (401)", [l40]),
        ("context", "toml provider table", f'[providers.{p}]\nkey = "{h40}"', [h40]),
        (
            "context",
            "jenkins env vars",
            f"<envVars>\n  <tree-map>\n    <string>{P}_TOKEN</string>\n    <string>{l32}</string>\n  </tree-map>\n</envVars>",
            [l32],
        ),
        ("context", "ruby client", f"client = {T}::Client.new('{l32}')", [l32]),
        ("prefixed", "dotted in json", f'{{"k": "{dotted}"}}', [dotted]),
        ("prefixed", "versioned upper prefix", f"relay={versioned}", [versioned]),
    ]


def development_more(v: Values) -> list[Form]:
    """More development forms, for shapes the issue names that the first ones lacked (their own generator)."""
    p, pw = v.provider(), v.password()
    T = p.title()
    vault, l32, l40, org, key = f"s.{v.b62(24)}", v.b36(32), v.b36(40), f"org-{v.b62(24)}", v.b62(40)
    url_body = v.b62(18) + "_" + v.b62(10) + "-" + v.b62(12)
    claims = base64.urlsafe_b64encode(f'{{"u":"{p}","a":"{v.b36(12)}"}}'.encode()).decode().rstrip("=")
    dotted_jwt = f"pk.{claims}.{v.b62(22)}"
    return [
        ("prefixed", "one-letter prefix", f"VAULT_ADDR=https://vault.{p}.io\nlogin with {vault}", [vault]),
        ("prefixed", "base64url body", f"forwarded {p[:3]}_{url_body} upstream", [f"{p[:3]}_{url_body}"]),
        ("context", "xml element with attributes", f'<password encrypted="false">{pw}</password>', [pw]),
        ("context", "basic auth object", f'requests.get(url, auth=HTTPBasicAuth("ci", "{l32}"))', [l32]),
        ("context", "provider-named key", f"{p}: {l40}", [l40]),
        ("pairs", "organization id not a uuid", f"{T} organization: {org}\n{T} api key: {key}", [org, key]),
        ("context", "class named for the provider", f'api = {T}("{l40}")', [l40]),
        ("context", "go constructor", f'c := {p}.New("{l40}")', [l40]),
        ("context", "js new", f"const c = new {T}('{l40}');", [l40]),
        ("prefixed", "dotted segments", f"tiles from {dotted_jwt} only", [dotted_jwt]),
    ]
