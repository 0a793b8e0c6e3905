// An MCP client on the official TypeScript SDK that signs in by itself, driven by Switchyard's
// authentication test.
//
// Usage: node oauth-client.mjs <endpoint-url>
// Connects without a token; on the 401 the SDK reads the endpoint's protected-resource metadata
// (RFC 9728), finds the authorization server, registers itself (RFC 7591) and asks for a code
// (PKCE, with the endpoint as resource indicator, RFC 8707). Playing the user's browser, this
// script follows the authorization server's redirects (an auto-approving test provider) to the
// code, hands it to the SDK, connects again and lists the tools.
// Prints one JSON line {"ok": true, "tools": [...], "authorization_server": ..., "resource": ...}
// and exits 0, or {"ok": false, "error": ...} and exits 1.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";

const [url] = process.argv.slice(2);
// Never listened on: the code is read from the redirect itself.
const redirectUrl = "http://127.0.0.1:9/callback";
const seen = {};
let clientInformation;
let tokens;
let verifier;
let code;

const provider = {
  get redirectUrl() {
    return redirectUrl;
  },
  get clientMetadata() {
    return {
      client_name: "switchyard-sdk-sign-in-test",
      redirect_uris: [redirectUrl],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
      application_type: "native",
    };
  },
  clientInformation: () => clientInformation,
  saveClientInformation: (info) => { clientInformation = info; },
  tokens: () => tokens,
  saveTokens: (saved) => { tokens = saved; },
  saveCodeVerifier: (saved) => { verifier = saved; },
  codeVerifier: () => verifier,
  async redirectToAuthorization(authorizationUrl) {
    seen.authorization_server = authorizationUrl.origin;
    seen.resource = authorizationUrl.searchParams.get("resource");
    let next = authorizationUrl.toString();
    const cookies = new Map();
    for (let hop = 0; hop < 20; hop++) {
      const cookie = [...cookies].map(([k, v]) => `${k}=${v}`).join("; ");
      const answer = await fetch(next, { redirect: "manual", headers: cookie ? { cookie } : {} });
      for (const line of answer.headers.getSetCookie()) {
        const [pair] = line.split(";");
        const at = pair.indexOf("=");
        cookies.set(pair.slice(0, at), pair.slice(at + 1));
      }
      const location = answer.headers.get("location");
      if (!location) throw new Error(`the sign-in stopped at HTTP ${answer.status} (${next})`);
      const target = new URL(location, next);
      if (target.toString().startsWith(redirectUrl)) {
        code = target.searchParams.get("code");
        if (!code) throw new Error(`the authorization server answered ${target.search}`);
        return;
      }
      next = target.toString();
    }
    throw new Error("too many redirects");
  },
};

const connect = async () => {
  const client = new Client({ name: "switchyard-sdk-sign-in-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { authProvider: provider }));
  return client;
};

try {
  let client;
  try {
    client = await connect();
    throw new Error("the endpoint let an unauthenticated client in");
  } catch (error) {
    if (!(error instanceof UnauthorizedError)) throw error;
    const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
    await transport.finishAuth(code);
    client = await connect();
  }
  const { tools } = await client.listTools();
  console.log(JSON.stringify({ ok: true, tools: tools.map((t) => t.name), ...seen }));
  await client.close();
  process.exit(0);
} catch (error) {
  console.log(JSON.stringify({ ok: false, error: String(error?.stack ?? error), ...seen }));
  process.exit(1);
}
