"""The official Python SDK's default client (`mcp.Client(url)`, which speaks 2026-07-28 to a server
that offers it), and every 2026-07-28 answer a client can get checked against the protocol's
published types (`mcp_types`, generated from the specification's schema). Driven by Switchyard's
interop test.

Usage: python modern.py <endpoint-url> '<spec JSON>'
The spec names what to exercise: {tool: {name, args, expect}, resource: {prefix},
prompt: {name, args}, completion: {prompt, argument, value, expect},
elicitation: {tool, expect}, sampling: {tool, expect}}.
Prints one JSON line {"steps": {name: {ok, ...}}} and exits 0 only if every step passed.
"""

import json
import sys
import urllib.request
from typing import Any

import anyio
import mcp_types._v2026_07_28 as wire
from mcp import Client, types

ANSWER = {"name": "Interop Tester", "check": True, "email": "tester@example.com", "integer": 7}
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "switchyard-shapes", "version": "1.0.0"},
}


def text(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def check(condition: Any, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def post(url: str, method: str, params: dict[str, Any], name: str | None = None) -> dict[str, Any]:
    """One 2026-07-28 request as a client writes it: its answer's message."""
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": META}}
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": method,
    }
    if name is not None:
        headers["mcp-name"] = name
    request = urllib.request.Request(url, json.dumps(body).encode(), headers, method="POST")
    with urllib.request.urlopen(request, timeout=30) as response:
        raw = response.read().decode()
    for line in [raw, *(line[5:].strip() for line in raw.splitlines() if line.startswith("data:"))]:
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            continue
        if "result" in message or "error" in message:
            return message
    raise AssertionError(f"no answer in {raw!r}")


def shaped(url: str, method: str, params: dict[str, Any], model: Any, name: str | None = None) -> dict:
    """Posts `method` and checks its result against the protocol's type `model`."""
    message = post(url, method, params, name)
    check("result" in message, f"{method}: {message}")
    model.model_validate(message["result"])
    return message["result"]


async def main(url: str, spec: dict[str, Any]) -> dict[str, Any]:
    steps: dict[str, Any] = {}
    elicited: list[str] = []
    sampled: list[Any] = []

    async def step(name: str, run) -> None:
        try:
            steps[name] = {"ok": True, **((await run()) or {})}
        except Exception as error:  # every failure is reported in the summary
            steps[name] = {"ok": False, "error": f"{type(error).__name__}: {error}"}

    async def on_elicit(context, params) -> types.ElicitResult:
        elicited.append(params.message)
        return types.ElicitResult(action="accept", content=dict(ANSWER))

    async def on_sample(context, params) -> types.CreateMessageResult:
        sampled.append(params.model_dump(mode="json", by_alias=True, exclude_none=True))
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="sampled by the client"), model="stub"
        )

    # The shapes first, on the wire: each kind of result a client can get.
    async def shapes():
        tools = shaped(url, "tools/list", {}, wire.ListToolsResult)
        shaped(url, "resources/list", {}, wire.ListResourcesResult)
        shaped(url, "resources/templates/list", {}, wire.ListResourceTemplatesResult)
        shaped(url, "prompts/list", {}, wire.ListPromptsResult)
        shaped(url, "server/discover", {}, wire.DiscoverResult)
        tool = spec["tool"]
        shaped(url, "tools/call", {"name": tool["name"], "arguments": tool["args"]}, wire.CallToolResult, tool["name"])
        resources = post(url, "resources/list", {})["result"]["resources"]
        uri = next(r["uri"] for r in resources if r["uri"].startswith(spec["resource"]["prefix"]))
        shaped(url, "resources/read", {"uri": uri}, wire.ReadResourceResult, uri)
        prompt = spec["prompt"]
        shaped(url, "prompts/get", {"name": prompt["name"], "arguments": prompt["args"]}, wire.GetPromptResult,
               prompt["name"])
        completion = spec["completion"]
        shaped(url, "completion/complete", {
            "ref": {"type": "ref/prompt", "name": completion["prompt"]},
            "argument": {"name": completion["argument"], "value": completion["value"]},
        }, wire.CompleteResult)
        return {"tools": len(tools["tools"])}

    await step("shapes", shapes)

    async with Client(
        url,
        read_timeout_seconds=30,
        elicitation_callback=on_elicit,
        sampling_callback=on_sample,
        client_info=types.Implementation(name="switchyard-interop-modern", version="1.0.0"),
    ) as client:

        async def connect():
            return {"protocol_version": client.session.protocol_version}

        async def call_tool():
            tool = spec["tool"]
            result = await client.call_tool(tool["name"], tool["args"])
            check(tool["expect"] in text(result), f"unexpected answer: {text(result)}")

        async def read_resource():
            listed = await client.list_resources()
            resource = next(
                (r for r in listed.resources if str(r.uri).startswith(spec["resource"]["prefix"])), None
            )
            check(resource, f"no resource starting with {spec['resource']['prefix']}")
            read_back = await client.read_resource(str(resource.uri))
            check(str(read_back.contents[0].uri) == str(resource.uri), "the contents name another URI")

        async def get_prompt():
            prompt = await client.get_prompt(spec["prompt"]["name"], spec["prompt"]["args"])
            everything = json.dumps([m.model_dump(mode="json") for m in prompt.messages])
            for value in spec["prompt"]["args"].values():
                check(value in everything, f"prompt lacks {value}")

        async def complete():
            completion = spec["completion"]
            result = await client.complete(
                types.PromptReference(type="ref/prompt", name=completion["prompt"]),
                {"name": completion["argument"], "value": completion["value"]},
            )
            check(completion["expect"] in result.completion.values, f"completions: {result.completion.values}")

        async def answer_elicitation():
            result = await client.call_tool(spec["elicitation"]["tool"], {})
            check(len(elicited) == 1, f"{len(elicited)} elicitation requests")
            check(spec["elicitation"]["expect"] in text(result), f"the answer did not arrive: {text(result)}")

        async def answer_sampling():
            result = await client.call_tool(spec["sampling"]["tool"], spec["sampling"].get("args", {}))
            check(len(sampled) == 1, f"{len(sampled)} sampling requests")
            check(spec["sampling"]["expect"] in text(result), f"the answer did not arrive: {text(result)}")
            return {"request": sampled[0]}

        await step("connect", connect)
        for name, run in [
            ("call_tool", call_tool),
            ("read_resource", read_resource),
            ("get_prompt", get_prompt),
            ("complete", complete),
            ("answer_elicitation", answer_elicitation),
            ("answer_sampling", answer_sampling),
        ]:
            if name.removeprefix("answer_") in spec or name not in ("answer_elicitation", "answer_sampling"):
                await step(name, run)
    return steps


if __name__ == "__main__":
    steps = anyio.run(main, sys.argv[1], json.loads(sys.argv[2]))
    print(json.dumps({"steps": steps}))
    sys.exit(0 if all(s["ok"] for s in steps.values()) else 1)
