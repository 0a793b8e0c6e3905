// The official TypeScript SDK's client, listing a server's tools and calling one, for
// Switchyard's interop suite: the same requests made directly and through the gateway, to be
// compared.
//
// Usage: node compare.mjs '<spec JSON>'
// The spec: {"targets": [{"label", "transport": "stdio" | "http" | "sse", "command", "args",
// "env" (stdio), "url" (http, sse), "call": {"name", "arguments"}}]}.
// Prints one JSON line {label: {"tools": [...], "call": {...}} or {"error": "..."}}.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const spec = JSON.parse(process.argv[2]);

function transportOf(target) {
  switch (target.transport) {
    case "stdio":
      return new StdioClientTransport({ command: target.command, args: target.args ?? [], env: target.env });
    case "sse":
      return new SSEClientTransport(new URL(target.url));
    default:
      return new StreamableHTTPClientTransport(new URL(target.url));
  }
}

async function listedAndCalled(target) {
  const client = new Client({ name: "switchyard-interop-compare", version: "1.0.0" });
  await client.connect(transportOf(target));
  try {
    const { tools } = await client.listTools();
    const call = await client.callTool(
      { name: target.call.name, arguments: target.call.arguments },
      undefined,
      { timeout: 60000 },
    );
    return { tools, call };
  } finally {
    await client.close();
  }
}

const results = {};
for (const target of spec.targets) {
  try {
    results[target.label] = await listedAndCalled(target);
  } catch (error) {
    results[target.label] = { error: String(error?.message ?? error) };
  }
}
console.log(JSON.stringify(results));
process.exit(0);
