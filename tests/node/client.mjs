// A real MCP client on the official TypeScript SDK, driven by Switchyard's interop test.
//
// Usage: node client.mjs <endpoint-url> '<spec JSON>'
// The spec names what to exercise: {echo: {tool, args, expect}, progress: {tool, args, steps},
// elicitation: {tool, expect}, resource: {prefix}, prompt: {name, args}}.
// Prints one JSON line {"steps": {name: {ok, ...}}} and exits 0 only if every step passed.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [url, specText] = process.argv.slice(2);
const spec = JSON.parse(specText);
const ANSWER = { name: "Interop Tester", check: true, email: "tester@example.com", integer: 7 };
const steps = {};
const text = (result) => (result.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
const check = (condition, message) => { if (!condition) throw new Error(message); };

async function step(name, run) {
  try {
    steps[name] = { ok: true, ...((await run()) ?? {}) };
  } catch (error) {
    steps[name] = { ok: false, error: String(error?.message ?? error) };
  }
}

const client = new Client(
  { name: "switchyard-interop-ts", version: "1.0.0" },
  { capabilities: { elicitation: { form: {} } } },
);
const elicited = [];
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  elicited.push(request.params.message);
  return { action: "accept", content: ANSWER };
});

await step("connect", () => client.connect(new StreamableHTTPClientTransport(new URL(url))));
if (steps.connect.ok) {
  await step("list_tools", async () => {
    const names = [];
    let cursor;
    do {
      const page = await client.listTools(cursor ? { cursor } : undefined);
      names.push(...page.tools.map((t) => t.name));
      cursor = page.nextCursor;
    } while (cursor);
    for (const tool of [spec.echo.tool, spec.progress.tool, spec.elicitation.tool])
      check(names.includes(tool), `${tool} is not listed`);
    return { count: names.length };
  });
  await step("call_tool", async () => {
    const result = await client.callTool({ name: spec.echo.tool, arguments: spec.echo.args });
    check(text(result).includes(spec.echo.expect), `unexpected answer: ${text(result)}`);
  });
  await step("call_tool_with_progress", async () => {
    const seen = [];
    const result = await client.callTool(
      { name: spec.progress.tool, arguments: spec.progress.args },
      undefined,
      { onprogress: (p) => seen.push(p.progress), timeout: 30000 },
    );
    check(!result.isError, `tool error: ${text(result)}`);
    check(seen.length === spec.progress.steps, `${seen.length} progress notifications`);
    return { progress: seen };
  });
  await step("read_resource", async () => {
    const listed = await client.listResources();
    const resource = listed.resources.find((r) => r.uri.startsWith(spec.resource.prefix));
    check(resource, `no resource starting with ${spec.resource.prefix}`);
    const read = await client.readResource({ uri: resource.uri });
    check(read.contents[0]?.uri === resource.uri, "the contents name another URI");
    check(read.contents[0]?.text || read.contents[0]?.blob, "empty contents");
    return { uri: resource.uri };
  });
  await step("get_prompt", async () => {
    const prompt = await client.getPrompt({ name: spec.prompt.name, arguments: spec.prompt.args });
    const all = JSON.stringify(prompt.messages);
    for (const value of Object.values(spec.prompt.args)) check(all.includes(value), `prompt lacks ${value}`);
  });
  await step("answer_elicitation", async () => {
    const result = await client.callTool({ name: spec.elicitation.tool, arguments: {} }, undefined, { timeout: 30000 });
    check(elicited.length === 1, `${elicited.length} elicitation requests`);
    check(text(result).includes(spec.elicitation.expect), `the answer did not arrive: ${text(result)}`);
  });
  await client.close();
}
console.log(JSON.stringify({ steps }));
process.exit(Object.values(steps).every((s) => s.ok) ? 0 : 1);
