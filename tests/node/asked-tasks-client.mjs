// A client on the official TypeScript SDK that answers sampling and elicitation requests, and
// runs them as tasks when it declares so (`tasks`) and the request asks for one. Driven by
// Switchyard's tests of tasks an upstream asks of a client.
//
// Usage: node asked-tasks-client.mjs <endpoint-url> '<spec JSON>'
// spec: {tools: [names to call], args?, tasks: bool, delay_ms?, task_calls?: [{name, args}]}
// `task_calls` are tool calls the client makes as tasks (it then waits for each result).
// Prints one JSON line: {listed, calls: {name: {isError, text} | {error}}, tasks: {name:
// {taskId, text}}, store: {created, results, elicited}} and exits 0 (the test judges what it
// printed). `elicited` holds the related task each elicitation request named.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { InMemoryTaskStore } from "@modelcontextprotocol/sdk/experimental/tasks";
import { CallToolResultSchema, CreateMessageRequestSchema, CreateTaskResultSchema, ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [url, specText] = process.argv.slice(2);
const spec = JSON.parse(specText);
const delay = spec.delay_ms ?? 1200;
const store = new InMemoryTaskStore();
const seen = { created: [], results: 0, elicited: [] };

const tasks = spec.tasks
  ? { list: {}, cancel: {}, requests: { sampling: { createMessage: {} }, elicitation: { create: {} } } }
  : undefined;
const client = new Client(
  { name: "switchyard-asked-tasks-ts", version: "1.0.0" },
  {
    capabilities: { sampling: {}, elicitation: { form: {} }, ...(tasks ? { tasks } : {}) },
    ...(tasks ? { taskStore: store } : {}),
  },
);

// Answers now, or creates a task that completes with the answer after `delay`.
async function answer(request, extra, reply) {
  if (!request.params.task || !extra.taskStore) return reply;
  const task = await extra.taskStore.createTask({ ttl: request.params.task.ttl, pollInterval: 200 });
  seen.created.push({ method: request.method, taskId: task.taskId, related: request.params._meta?.["io.modelcontextprotocol/related-task"] });
  setTimeout(() => {
    // A task cancelled meanwhile keeps its end: storing a result then fails, as it should.
    extra.taskStore.storeTaskResult(task.taskId, "completed", reply).then(() => { seen.results += 1; }, () => {});
  }, delay);
  return { task };
}

client.setRequestHandler(CreateMessageRequestSchema, (request, extra) => {
  const asked = request.params.messages.map((m) => m.content?.text ?? "").join(" ");
  return answer(request, extra, {
    role: "assistant",
    content: { type: "text", text: `sampled by the client: ${asked}` },
    model: "switchyard-test-model",
    stopReason: "endTurn",
  });
});
client.setRequestHandler(ElicitRequestSchema, (request, extra) => {
  seen.elicited.push(request.params._meta?.["io.modelcontextprotocol/related-task"]?.taskId ?? null);
  const content = {};
  for (const [name, property] of Object.entries(request.params.requestedSchema?.properties ?? {})) {
    content[name] = property.type === "number" || property.type === "integer" ? 7 : property.type === "boolean" ? true : property.enum?.[0] ?? property.oneOf?.[0]?.const ?? "answered";
  }
  return answer(request, extra, { action: "accept", content });
});

const out = { calls: {}, tasks: {} };
try {
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  out.listed = (await client.listTools()).tools.map((t) => t.name);
  for (const name of spec.tools) {
    try {
      const result = await client.callTool({ name, arguments: spec.args?.[name] ?? {} }, undefined, { timeout: 60000 });
      out.calls[name] = { isError: !!result.isError, text: (result.content ?? []).map((c) => c.text ?? "").join("\n") };
    } catch (error) {
      out.calls[name] = { error: String(error?.message ?? error) };
    }
  }
  for (const { name, args } of spec.task_calls ?? []) {
    try {
      const created = await client.request(
        { method: "tools/call", params: { name, arguments: args ?? {}, task: { ttl: 60000 } } },
        CreateTaskResultSchema,
      );
      const taskId = created.task.taskId;
      const result = await client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema, { timeout: 60000 });
      out.tasks[name] = { taskId, text: (result.content ?? []).map((c) => c.text ?? "").join("\n") };
    } catch (error) {
      out.tasks[name] = { error: String(error?.message ?? error) };
    }
  }
} catch (error) {
  out.error = String(error?.message ?? error);
}
out.store = seen;
console.log(JSON.stringify(out));
await client.close().catch(() => {});
process.exit(0);
