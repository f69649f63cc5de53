// `pai mcp` as the TypeScript SDK's client meets it, over stdio or streamable HTTP: every tool `tools/list` names is
// called with valid arguments (filled from its inputSchema, keyed by parameter name), then a few hostile calls, then
// the SDK's close (on stdio: stdin ended, 2 s grace, then SIGTERM). Prints one JSON report on stdout;
// tests/serving/test_mcp_clients.py judges it.
// Usage: node every_tool.mjs '{"command": ..., "args": [...], "env": {...}, "cwd": ...}'   (stdio: the server to start)
//        node every_tool.mjs '{"url": "http://127.0.0.1:8485/mcp"}'                          (streamable HTTP)
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const launch = JSON.parse(process.argv[2]);
const NOTE_TITLE = "AWS setup"; // an ordinary title that once read as a secret
const NOTE =
  "# Tide pools\n\nThe purple sea urchin scrapes kelp off the rocks of Monterey tide pools with its five teeth, " +
  "called Aristotle's lantern.";
const QUESTION = "What does the purple sea urchin use to scrape kelp?";

const report = { tools: [], calls: {}, hostile: {}, stderr: "" };
const transport = launch.url
  ? new StreamableHTTPClientTransport(new URL(launch.url))
  : new StdioClientTransport({ ...launch, stderr: "pipe" });
transport.stderr?.on("data", (d) => (report.stderr += d.toString()));
const client = new Client({ name: "pai-brain-tests", version: "1.0.0" });

// The value each parameter takes, by name; what the earlier calls returned fills the ids.
const got = {};
const VALUES = {
  text: () => NOTE,
  title: () => NOTE_TITLE,
  query: () => QUESTION,
  k: () => 3,
  query_id: () => got.query_id,
  answer: () => "The urchin uses Aristotle's lantern, its five teeth [1].",
  rating: () => 1,
  user: () => QUESTION,
  assistant: () =>
    "Postgres autovacuum reclaims dead tuples; on busy tables lower autovacuum_vacuum_scale_factor to 0.05.",
  source: () => "pai-brain-tests",
  capture_id: () => got.capture_id,
};
const ORDER = ["remember", "context", "feedback", "staging_file", "capture", "capture_result"];

function argsFor(tool) {
  const schema = tool.inputSchema ?? {};
  const args = {};
  for (const [name, prop] of Object.entries(schema.properties ?? {})) {
    const required = (schema.required ?? []).includes(name);
    if (name in VALUES) args[name] = VALUES[name]();
    else if (required) args[name] = prop.type === "integer" || prop.type === "number" ? 1 : "default";
  }
  return args;
}

async function call(name, args, options) {
  const t0 = performance.now();
  try {
    const r = await client.callTool({ name, arguments: args }, undefined, options);
    const text = (r.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
    return { isError: r.isError === true, text, structured: r.structuredContent ?? null, ms: performance.now() - t0 };
  } catch (e) {
    return { rpcError: { code: e.code ?? null, message: String(e.message ?? e) }, ms: performance.now() - t0 };
  }
}

try {
  // a first start (initdb, the models) can pass the SDK's 60 s default on a busy machine: not what is tested here
  await client.connect(transport, { timeout: 300000 });
  report.serverVersion = client.getServerVersion();
  report.capabilities = client.getServerCapabilities();
  const { tools } = await client.listTools();
  report.tools = tools;
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  const names = [...ORDER.filter((n) => n in byName), ...tools.map((t) => t.name).filter((n) => !ORDER.includes(n))];
  for (const name of names) {
    const r = await call(name, argsFor(byName[name]));
    report.calls[name] = r;
    if (name === "context" && r.structured) got.query_id = r.structured.query_id;
    if (name === "capture" && r.structured) got.capture_id = r.structured.id;
  }
  // hostile, each answered at once (a timeout of 10 s, not the SDK's 60 s, would show a hang)
  const quick = { timeout: 10000 };
  const h = report.hostile;
  h.wrong_type = await call("context", { query: 42 }, quick);
  h.k_as_string = await call("context", { query: QUESTION, k: "3" }, quick);
  h.misspelt = await call("context", { qeury: QUESTION }, quick);
  h.unknown_tool = await call("no_such_tool", {}, quick);
  h.lone_surrogate = await call("context", { query: "bees \ud800" }, quick);
  h.nul = await call("remember", { text: "a\u0000b", title: "nul" }, quick);
  h.unshown_and_unknown = await call("feedback", { query_id: got.query_id, answer: "see [1], [12] and [99]" }, quick);
  h.raw_answer = await call("feedback", { query_id: got.query_id, answer: "[1]" }, quick);
  // a candidate the selector ranked but `k` cut: cited, it is reported as not shown and labels nothing
  await call("remember", { text: NOTE.replace("purple", "red").replace("Monterey", "Oregon"), title: "Urchins 2" });
  const cut = await call("context", { query: QUESTION, k: 1 }, quick);
  h.cut_by_k = { context: cut.structured };
  h.not_shown = await call("feedback", { query_id: cut.structured?.query_id, answer: "[1] and [2]" }, quick);
  h.raw_null_title = await call("remember", { text: "null", title: "null" }, quick);
  h.foreign_query_staging = await call("staging_file", { query_id: 999999 }, quick);
  try {
    await client.request({ method: "prompts/get", params: { name: "x" } }, undefined, quick);
    h.prompts_get = { ok: true };
  } catch (e) {
    h.prompts_get = { rpcError: { code: e.code ?? null, message: String(e.message ?? e) } };
  }
  try {
    await client.ping(quick);
    h.ping_after = { ok: true };
  } catch (e) {
    h.ping_after = { rpcError: { code: e.code ?? null, message: String(e.message ?? e) } };
  }
} catch (e) {
  report.failed = String(e.stack ?? e);
}
// the SDK's own close: stdin ended, then 2 s for the server to leave before SIGTERM
const child = transport._process;
const t0 = performance.now();
const exited = new Promise((resolve) => {
  if (!child || child.exitCode !== null || child.signalCode !== null) resolve();
  else child.once("exit", () => resolve((report.exitMs = performance.now() - t0)));
});
await client.close();
report.close = { ms: performance.now() - t0, exitCode: child?.exitCode ?? null, signal: child?.signalCode ?? null };
await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 10000).unref())]);
report.exit = { exitCode: child?.exitCode ?? null, signal: child?.signalCode ?? null };
process.stdout.write(JSON.stringify(report) + "\n");
