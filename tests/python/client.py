"""A real MCP client on the official Python SDK (`mcp`), driven by Switchyard's interop test.

Usage: python client.py <endpoint-url> '<spec JSON>'
The spec names what to exercise: {echo: {tool, args, expect}, progress: {tool, args, steps},
elicitation: {tool, expect}, resource: {prefix}, prompt: {name, args}}.
Prints one JSON line {"steps": {name: {ok, ...}}} and exits 0 only if every step passed.
"""

import json
import sys
from typing import Any

import anyio
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client

ANSWER = {"name": "Interop Tester", "check": True, "email": "tester@example.com", "integer": 7}


def text(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def check(condition: Any, message: str) -> None:
    if not condition:
        raise AssertionError(message)


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

    async with streamable_http_client(url) as (read, write):
        async with ClientSession(
            read,
            write,
            read_timeout_seconds=30,
            elicitation_callback=on_elicit,
            sampling_callback=on_sample,
            client_info=types.Implementation(name="switchyard-interop-py", version="1.0.0"),
        ) as session:
            async def connect():
                result = await session.initialize()
                return {"protocol_version": result.protocol_version}

            await step("connect", connect)
            if not steps["connect"]["ok"]:
                return steps

            async def list_tools():
                names: list[str] = []
                cursor = None
                while True:
                    page = await session.list_tools(
                        params=types.PaginatedRequestParams(cursor=cursor) if cursor else None
                    )
                    names.extend(t.name for t in page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        break
                for tool in (spec["echo"]["tool"], spec["progress"]["tool"], spec["elicitation"]["tool"]):
                    check(tool in names, f"{tool} is not listed")
                return {"count": len(names)}

            async def call_tool():
                result = await session.call_tool(spec["echo"]["tool"], spec["echo"]["args"])
                check(spec["echo"]["expect"] in text(result), f"unexpected answer: {text(result)}")

            async def call_tool_with_progress():
                seen: list[float] = []

                async def on_progress(progress, total, message):
                    seen.append(progress)

                result = await session.call_tool(
                    spec["progress"]["tool"], spec["progress"]["args"], progress_callback=on_progress
                )
                check(not result.is_error, f"tool error: {text(result)}")
                check(len(seen) == spec["progress"]["steps"], f"{len(seen)} progress notifications")
                return {"progress": seen}

            async def read_resource():
                listed = await session.list_resources()
                resource = next(
                    (r for r in listed.resources if str(r.uri).startswith(spec["resource"]["prefix"])), None
                )
                check(resource, f"no resource starting with {spec['resource']['prefix']}")
                read_back = await session.read_resource(resource.uri)
                check(str(read_back.contents[0].uri) == str(resource.uri), "the contents name another URI")
                return {"uri": str(resource.uri)}

            async def get_prompt():
                prompt = await session.get_prompt(spec["prompt"]["name"], spec["prompt"]["args"])
                everything = json.dumps([m.model_dump(mode="json") for m in prompt.messages])
                for value in spec["prompt"]["args"].values():
                    check(value in everything, f"prompt lacks {value}")

            async def answer_elicitation():
                result = await session.call_tool(spec["elicitation"]["tool"], {})
                check(len(elicited) == 1, f"{len(elicited)} elicitation requests")
                check(spec["elicitation"]["expect"] in text(result), f"the answer did not arrive: {text(result)}")

            async def answer_sampling():
                sampling = spec["sampling"]
                result = await session.call_tool(sampling["tool"], sampling.get("args", {}))
                check(len(sampled) == 1, f"{len(sampled)} sampling requests")
                check(sampling["expect"] in text(result), f"the answer did not arrive: {text(result)}")
                return {"request": sampled[0]}

            for name, run in [
                ("list_tools", list_tools),
                ("call_tool", call_tool),
                ("call_tool_with_progress", call_tool_with_progress),
                ("read_resource", read_resource),
                ("get_prompt", get_prompt),
                ("answer_elicitation", answer_elicitation),
                ("answer_sampling", answer_sampling),
            ]:
                if name in ("answer_sampling",) and "sampling" not in spec:
                    continue
                await step(name, run)
    return steps


if __name__ == "__main__":
    steps = anyio.run(main, sys.argv[1], json.loads(sys.argv[2]))
    print(json.dumps({"steps": steps}))
    sys.exit(0 if all(s["ok"] for s in steps.values()) else 1)
