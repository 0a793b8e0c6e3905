// A tasks-capable client on the official TypeScript SDK, driven by Switchyard's task tests.
//
// Usage: node tasks-client.mjs <endpoint-url> '<spec JSON>'
// spec: {tool, args, expect, headers?, probe?}. Without `probe`: lists tools (the tool must
// say it runs as a task), creates a task, polls it with tasks/get until it ends, fetches its
// result, finds it with tasks/list, then creates another and cancels it. With `probe` (a task
// id): only asks tasks/get about that id and reports the error.
// Prints one JSON line {"steps": {name: {ok, ...}}} and exits 0 only if every step passed.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema, CreateTaskResultSchema, TaskStatusNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const [url, specText] = process.argv.slice(2);
const spec = JSON.parse(specText);
const steps = {};
const check = (condition, message) => { if (!condition) throw new Error(message); };
const text = (result) => (result.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function step(name, run) {
  try {
    steps[name] = { ok: true, ...((await run()) ?? {}) };
  } catch (error) {
    steps[name] = { ok: false, error: String(error?.message ?? error), code: error?.code };
  }
}

const client = new Client(
  { name: "switchyard-tasks-ts", version: "1.0.0" },
  { capabilities: { tasks: { list: {}, cancel: {} } } },
);
const notified = [];
client.setNotificationHandler(TaskStatusNotificationSchema, (notification) => {
  notified.push(notification.params);
});
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: spec.headers ?? {} },
});

await step("connect", () => client.connect(transport));
if (steps.connect.ok && spec.probe) {
  await step("probe", async () => {
    try {
      await client.experimental.tasks.getTask(spec.probe);
    } catch (error) {
      return { refused: true, code: error?.code, message: String(error?.message ?? error) };
    }
    return { refused: false };
  });
} else if (steps.connect.ok) {
  await step("capabilities", async () => {
    const tasks = client.getServerCapabilities()?.tasks;
    check(tasks?.requests?.tools?.call, `no task-augmented tools/call announced: ${JSON.stringify(tasks)}`);
    return { tasks };
  });
  await step("list_tools", async () => {
    const { tools } = await client.listTools();
    const tool = tools.find((t) => t.name === spec.tool);
    check(tool, `${spec.tool} is not listed`);
    check(tool.execution?.taskSupport === "required", `execution: ${JSON.stringify(tool.execution)}`);
  });
  let taskId;
  await step("create", async () => {
    const created = await client.request(
      { method: "tools/call", params: { name: spec.tool, arguments: spec.args, task: { ttl: 60000 } } },
      CreateTaskResultSchema,
    );
    taskId = created.task.taskId;
    check(created.task.status === "working", `status ${created.task.status}`);
    return { taskId, pollInterval: created.task.pollInterval };
  });
  await step("poll", async () => {
    const seen = [];
    for (let i = 0; i < 120; i++) {
      const task = await client.experimental.tasks.getTask(taskId);
      check(task.taskId === taskId, `tasks/get named ${task.taskId}`);
      if (seen.at(-1) !== task.statusMessage) seen.push(task.statusMessage);
      if (task.status === "completed") return { seen };
      check(task.status === "working" || task.status === "input_required", `status ${task.status}`);
      await sleep(250);
    }
    throw new Error("the task did not complete");
  });
  await step("result", async () => {
    const result = await client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
    check(text(result).includes(spec.expect), `unexpected result: ${text(result).slice(0, 200)}`);
    return { related: result._meta?.["io.modelcontextprotocol/related-task"]?.taskId === taskId };
  });
  await step("list", async () => {
    const ids = [];
    let cursor;
    do {
      const page = await client.experimental.tasks.listTasks(cursor);
      ids.push(...page.tasks.map((t) => t.taskId));
      cursor = page.nextCursor;
    } while (cursor);
    check(ids.includes(taskId), `tasks/list: ${JSON.stringify(ids)}`);
    return { count: ids.length };
  });
  await step("cancel", async () => {
    const created = await client.request(
      { method: "tools/call", params: { name: spec.tool, arguments: spec.args, task: { ttl: 60000 } } },
      CreateTaskResultSchema,
    );
    const cancelled = await client.experimental.tasks.cancelTask(created.task.taskId);
    check(cancelled.status === "cancelled", `tasks/cancel answered ${cancelled.status}`);
    const task = await client.experimental.tasks.getTask(created.task.taskId);
    check(task.status === "cancelled", `after cancelling, tasks/get says ${task.status}`);
  });
  await step("notifications", async () => {
    for (let i = 0; i < 20 && !notified.some((n) => n.taskId === taskId && n.status === "completed"); i++) await sleep(100);
    const mine = notified.filter((n) => n.taskId === taskId);
    check(mine.some((n) => n.status === "completed"), `status notifications: ${JSON.stringify(notified.map((n) => [n.taskId === taskId, n.status]))}`);
    return { count: mine.length };
  });
  await step("task_id", () => ({ taskId }));
}
await client.close().catch(() => {});
console.log(JSON.stringify({ steps }));
process.exit(Object.values(steps).every((s) => s.ok) ? 0 : 1);
