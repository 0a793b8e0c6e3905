"""Switchyard's approval question, as a real client on the official Python SDK answers it: the
client calls a tool that waits for approval and answers the form Switchyard sends with `allow`
as told. `default` is the SDK's default client (`mcp.Client`, which speaks 2026-07-28 where the
server does: the question comes as `input_required`); `legacy` its session-era mode.

Usage: python approve.py <endpoint-url> <bearer token> <tool> '<arguments JSON>' yes|no default|legacy
Prints one JSON line {"asked": [messages], "is_error": bool, "text": str}.
"""

import json
import sys

import anyio
import httpx2
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client


async def main(url: str, token: str, tool: str, arguments: dict, allow: bool, mode: str) -> dict:
    asked: list[str] = []

    async def on_elicit(context, params) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"allow": allow})

    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http:
        async with Client(
            streamable_http_client(url, http_client=http),
            mode="auto" if mode == "default" else "legacy",
            read_timeout_seconds=60,
            elicitation_callback=on_elicit,
            client_info=types.Implementation(name="switchyard-approval-py", version="1.0.0"),
        ) as client:
            result = await client.call_tool(tool, arguments)
    text = "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))
    return {"asked": asked, "is_error": bool(result.is_error), "text": text}


if __name__ == "__main__":
    url, token, tool, arguments, allow, mode = sys.argv[1:7]
    print(json.dumps(anyio.run(main, url, token, tool, json.loads(arguments), allow == "yes", mode)))
