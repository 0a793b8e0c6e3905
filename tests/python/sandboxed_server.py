"""An MCP server, on the official Python SDK over stdio, whose tools try what a sandbox should
stop: reading and writing files, opening a socket, forking many processes, reading another
process's environment, taking much memory and many files. Each tool says what happened
("ok: ..." or "refused: ERROR") rather than fail, so that Switchyard's tests can compare the
same server sandboxed and free. `add` is its real work.
"""

import os
import socket
import time

from mcp.server.mcpserver import MCPServer

server = MCPServer("sandbox-probe")


def attempt(action):
    try:
        return "ok: " + str(action())
    except Exception as error:  # noqa: BLE001 - every refusal is the answer
        return f"refused: {type(error).__name__}: {error}"


@server.tool(description="The sum of two integers")
def add(a: int, b: int) -> str:
    return str(a + b)


@server.tool(description="Read a file")
def read(path: str) -> str:
    return attempt(lambda: open(path).read())


@server.tool(description="Write a file")
def write(path: str, text: str) -> str:
    def act():
        with open(path, "w") as file:
            file.write(text)
        return len(text)

    return attempt(act)


@server.tool(description="Connect to a TCP port on the loopback interface")
def connect(port: int) -> str:
    def act():
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return "connected"

    return attempt(act)


@server.tool(description="Start processes that wait a moment; how many started")
def spawn(count: int) -> str:
    started = []
    refusal = None
    for _ in range(count):
        try:
            child = os.fork()
        except OSError as error:
            refusal = error
            break
        if child == 0:
            time.sleep(3)
            os._exit(0)
        started.append(child)
    for child in started:
        os.kill(child, 9)
        os.waitpid(child, 0)
    if refusal is None:
        return f"ok: {len(started)}"
    return f"refused: after {len(started)}: {refusal}"


@server.tool(description="Read the environment of process `pid`")
def environ(pid: int) -> str:
    return attempt(lambda: len(open(f"/proc/{pid}/environ", "rb").read()))


@server.tool(description="Take `mb` MiB of memory, and give it back")
def allocate(mb: int) -> str:
    return attempt(lambda: len(bytearray(mb << 20)))


@server.tool(description="Hold `count` files open at once, and close them")
def hold_open(count: int) -> str:
    def act():
        files = []
        try:
            for _ in range(count):
                files.append(open("/dev/null"))
            return len(files)
        finally:
            for file in files:
                file.close()

    return attempt(act)


if __name__ == "__main__":
    server.run()
