// A stdio MCP server that lists what a recorded file holds, as JSON exactly as recorded
// (no SDK in between to drop what it does not model), and answers a tool call with the _meta
// it received. Usage: node replay-server.mjs FILE
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";

const recorded = JSON.parse(readFileSync(process.argv[2], "utf8"));
const lists = {
  "tools/list": ["tools", recorded.tools],
  "prompts/list": ["prompts", recorded.prompts],
  "resources/list": ["resources", recorded.resources],
  "resources/templates/list": ["resourceTemplates", recorded.resourceTemplates],
};
const capabilities = {};
if (recorded.tools) capabilities.tools = {};
if (recorded.prompts) capabilities.prompts = {};
if (recorded.resources) capabilities.resources = {};

const send = (message) => process.stdout.write(JSON.stringify(message) + "\n");
createInterface({ input: process.stdin }).on("line", (line) => {
  let message;
  try { message = JSON.parse(line); } catch { return; }
  if (message.id === undefined || message.method === undefined) return;
  const { id, method, params } = message;
  if (method === "initialize") {
    send({ jsonrpc: "2.0", id, result: {
      protocolVersion: params?.protocolVersion ?? "2025-11-25",
      capabilities, serverInfo: { name: "replay", version: "1.0.0" } } });
  } else if (method === "ping") {
    send({ jsonrpc: "2.0", id, result: {} });
  } else if (method === "tools/call") {
    // What the call's _meta held, so that a test can see what reached the server.
    const text = JSON.stringify(params?._meta ?? null);
    send({ jsonrpc: "2.0", id, result: { content: [{ type: "text", text }] } });
  } else if (lists[method]) {
    const [field, entries] = lists[method];
    send({ jsonrpc: "2.0", id, result: { [field]: entries ?? [] } });
  } else {
    send({ jsonrpc: "2.0", id, error: { code: -32601, message: `no method ${method}` } });
  }
});
