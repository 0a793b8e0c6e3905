"""An MCP server with an MCP App, built on the official Python SDK's Apps extension
(`mcp.server.apps`), over stdio: a tool bound to a `ui://` interface (named in `_meta.ui` and in
the older flat keys too), and the interface itself with its CSP and permissions. Switchyard's
tests read it through the gateway and directly.
"""

from mcp.server.apps import Apps, ResourceCsp, ResourcePermissions
from mcp.server.mcpserver import MCPServer

INTERFACE = "ui://widget/clock.html"
HTML = "<!doctype html><title>Clock</title><div id=clock>12:00</div>"

apps = Apps()


@apps.tool(
    resource_uri=INTERFACE,
    visibility=["model", "app"],
    meta={"ui/resourceUri": INTERFACE, "openai/outputTemplate": INTERFACE},
    description="The time, with a clock that shows it",
)
def clock() -> str:
    return "12:00"


apps.add_html_resource(
    INTERFACE,
    HTML,
    csp=ResourceCsp(connect_domains=["https://api.example.com"], resource_domains=["https://cdn.example.com"]),
    permissions=ResourcePermissions(clipboard_write={}),
    prefers_border=True,
)

server = MCPServer("apps-probe", extensions=[apps])

if __name__ == "__main__":
    server.run()
