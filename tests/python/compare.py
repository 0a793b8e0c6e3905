"""The official Python SDK's clients, listing a server's tools and calling one, for Switchyard's
interop suite: the same requests made directly and through the gateway, to be compared.

Usage: python compare.py '<spec JSON>'
The spec: {"client": "legacy" | "modern", "targets": [{"label", "transport": "stdio" | "http" |
"sse", "command", "args", "env" (stdio), "url" (http, sse), "call": {"name", "arguments"}}]}.
"legacy" is `mcp.Client(server, mode="legacy")`, the session era (`initialize`); "modern" is
the default `mcp.Client(server)`, which speaks 2026-07-28 where the server does.
Prints one JSON line {label: {"tools": [...], "call": {...}} or {"error": "..."}}.
"""

import json
import sys
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.sse import sse_client


def dumped(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def listed_and_called(session: Any, call: dict[str, Any]) -> dict[str, Any]:
    tools = await session.list_tools()
    result = await session.call_tool(call["name"], call["arguments"])
    return {"tools": [dumped(tool) for tool in tools.tools], "call": dumped(result)}


def server_of(target: dict[str, Any]) -> Any:
    """What `mcp.Client` is given to reach `target`."""
    transport = target["transport"]
    if transport == "stdio":
        return StdioServerParameters(
            command=target["command"], args=target.get("args", []), env=target.get("env")
        )
    if transport == "sse":
        return sse_client(target["url"])
    return target["url"]


async def run(target: dict[str, Any], mode: str) -> dict[str, Any]:
    async with Client(server_of(target), mode=mode, read_timeout_seconds=60) as client:
        return await listed_and_called(client, target["call"])


async def main(spec: dict[str, Any]) -> dict[str, Any]:
    mode = "auto" if spec["client"] == "modern" else "legacy"
    results: dict[str, Any] = {}
    for target in spec["targets"]:
        try:
            results[target["label"]] = await run(target, mode)
        except Exception as error:  # every failure is reported in the summary
            results[target["label"]] = {"error": f"{type(error).__name__}: {error}"}
    return results


if __name__ == "__main__":
    print(json.dumps(anyio.run(main, json.loads(sys.argv[1]))))
