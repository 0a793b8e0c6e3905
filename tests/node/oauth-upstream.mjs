// A real OAuth-protected MCP upstream for Switchyard's end-to-end tests.
//
// Starts, in one Node 22 process, on 127.0.0.1 with ephemeral ports:
//   * an OAuth 2.1 / OpenID Connect authorization server: `oidc-provider` (panva, certified),
//     with resource indicators (RFC 8707) so access tokens are JWTs (RFC 9068, typ at+jwt)
//     whose `aud` is the MCP server's URL, PKCE required, refresh tokens, dynamic client
//     registration (RFC 7591), client ID metadata documents, a pre-registered client, and a
//     short access token lifetime;
//   * an MCP server on the official TypeScript SDK (Streamable HTTP, stateful sessions) that
//     refuses requests without a valid token (401 + `WWW-Authenticate: Bearer ...
//     resource_metadata="..."`), serves RFC 9728 protected resource metadata naming the
//     issuer, and verifies tokens against the provider's JWKS (issuer, audience, expiry, typ).
//     Its tool `whoami` answers with the token's subject and a call counter; each subject has a
//     resource of its own (`notes://<sub>/private`, listed only to that subject's sessions),
//     which clients may subscribe to (the subscriptions, with the subject of the token that
//     made each, are in the stats; `<control>/touch` announces an update of one).
//   * optionally, the token exchange grant (RFC 8693) at the same provider: a user's own JWT
//     from another issuer (`--subject-jwks`, `--subject-issuer`) exchanged by a client allowed
//     to (`--exchange-client-id`) for an access token of the MCP server's audience, for the
//     same subject, with an `act` claim naming that client; or, asked for an identity assertion
//     (ID-JAG, enterprise-managed authorization), one for this provider's own issuer naming
//     the pre-registered client, which the JWT bearer grant then takes from that client for an
//     access token (with a `via: "id-jag"` claim); and an MCP server that accepts only such
//     tokens (`--accept-only-exchanged=on`);
//   * test-only control endpoints (`<control>/stats`, `<control>/config`, ...) on the MCP port.
//
// Prints one JSON line on stdout once both listen (everything else goes to stderr):
//   {"issuer": ..., "mcp": ..., "resource_metadata": ..., "control": ..., "client": {...}, ...}
//
// Configuration: environment variables OAUTH_<NAME> or arguments --<name>=<value>
// (argument wins); names and defaults in DEFAULTS below, e.g.
//   node oauth-upstream.mjs --access-token-ttl=5 --client-id=gw --client-secret=s3cret
import http from 'node:http';
import { fstatSync } from 'node:fs';
import { randomBytes, randomUUID } from 'node:crypto';

// oidc-provider prints its notices with console.info (stdout): keep stdout for the JSON line.
console.info = console.error;
console.log = console.error;

const { default: Provider, errors } = await import('oidc-provider');
const jose = await import('jose');
const { McpServer } = await import('@modelcontextprotocol/sdk/server/mcp.js');
const { StreamableHTTPServerTransport } = await import('@modelcontextprotocol/sdk/server/streamableHttp.js');
const { SSEServerTransport } = await import('@modelcontextprotocol/sdk/server/sse.js');
const { createMcpExpressApp } = await import('@modelcontextprotocol/sdk/server/express.js');
const { requireBearerAuth } = await import('@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js');
const { mcpAuthMetadataRouter, getOAuthProtectedResourceMetadataUrl } = await import('@modelcontextprotocol/sdk/server/auth/router.js');
const { InvalidTokenError } = await import('@modelcontextprotocol/sdk/server/auth/errors.js');
const { isInitializeRequest, SubscribeRequestSchema, UnsubscribeRequestSchema } = await import('@modelcontextprotocol/sdk/types.js');

// ---------------------------------------------------------------- configuration
const DEFAULTS = {
  access_token_ttl: '5', // seconds
  refresh_token_ttl: '3600', // seconds
  rotate_refresh_tokens: 'always', // always | never | default (oidc-provider's policy)
  client_id: 'switchyard-test', // the pre-registered client ('' for none)
  client_secret: 'switchyard-test-secret', // '' makes it a public client (auth method none)
  client_auth_method: 'client_secret_basic', // or client_secret_post
  redirect_uris: 'http://127.0.0.1/oauth/callback', // comma-separated
  application_type: 'native', // native: loopback redirect URIs match on any port (RFC 8252 7.3)
  registration: 'on', // open dynamic client registration (RFC 7591) at <issuer>/reg
  cimd: 'on', // client ID metadata documents (client_id is an https URL)
  cimd_loopback_http: 'on', // fetch https://127.0.0.1:P/x documents as http://127.0.0.1:P/x
  interactions: 'dev', // dev (login and consent forms) | auto (approve) | deny (access_denied)
  account: 'alice', // the subject in auto mode
  resource_scopes: 'mcp:tools mcp:admin', // scopes the MCP server (resource server) knows
  required_scopes: '', // scopes the MCP server demands (space-separated); '' for none
  mcp_path: '/mcp',
  transport: 'streamable_http', // or sse: the legacy HTTP+SSE transport (GET mcp_path, POST /messages)
  prm_root: 'off', // also serve metadata at /.well-known/oauth-protected-resource
  use_granted_resource: 'off', // token requests without `resource` still get the MCP audience
  extra_resource: '', // another resource server the provider mints tokens for (a gateway's URL)
  token_endpoint: 'up', // down: the token endpoint answers 503 with an HTML page (an outage)
  subject_jwks: '', // the JWKS URL of the issuer of users' own tokens: enables token exchange
  subject_issuer: '', // their `iss`
  exchange_client_id: 'switchyard-exchange', // the client allowed to exchange tokens
  exchange_client_secret: 'switchyard-exchange-secret',
  accept_only_exchanged: 'off', // on: the MCP server refuses tokens without an `act` claim
  exchange: 'on', // off: the token exchange grant answers invalid_grant (users' tokens refused)
};
const opts = { ...DEFAULTS };
for (const key of Object.keys(DEFAULTS)) {
  const env = process.env[`OAUTH_${key.toUpperCase()}`];
  if (env !== undefined) opts[key] = env;
}
for (const arg of process.argv.slice(2)) {
  const match = /^--([a-z0-9-]+)=(.*)$/s.exec(arg);
  const key = match?.[1].replaceAll('-', '_');
  if (!match || !(key in DEFAULTS)) {
    console.error(`unknown argument ${arg}; known: ${Object.keys(DEFAULTS).map((k) => `--${k.replaceAll('_', '-')}`).join(' ')}`);
    process.exit(2);
  }
  opts[key] = match[2];
}
const on = (value) => ['on', '1', 'true', 'yes'].includes(String(value).toLowerCase());
const seconds = (value) => Number.parseInt(value, 10);

// ---------------------------------------------------------------- counters
const stats = {
  as: {
    authorizations: 0, // successful authorization responses (code issued)
    authorization_errors: {}, // error code -> count (errors sent to redirect_uri or shown)
    tokens: {}, // grant_type -> successful token responses
    token_errors: {}, // error code -> count
    registrations: 0, // dynamic client registrations
    grants_revoked: 0, // e.g. refresh token reuse
    access_tokens_issued: 0,
    last_access_token: null, // decoded claims of the newest JWT access token
    last_error: null, // {error, error_description, error_detail} of the newest refused request
    token_outages: 0, // token requests answered 503 while token_endpoint is down
    exchanges: [], // {sub, client_id, requested, audience, resource}: token exchanges granted
    assertions: [], // {sub, client_id, resource}: ID-JAGs taken by the JWT bearer grant
  },
  mcp: {
    requests: 0, // requests to the MCP endpoint
    verified: 0, // tokens that passed verification
    rejected: 0, // 401/403 answers
    rejected_by: {}, // error_description -> count
    tool_calls: 0,
    sessions_opened: 0,
    subject_mismatch: 0,
    tokens_seen: 0, // distinct access tokens (jti) that passed verification
    cimd_fetches: 0, // GET /cimd/<name> (the provider fetching a client ID metadata document)
    subscriptions: [], // {uri, sub}: resources/subscribe requests, with the token's subject
  },
};
const seenJtis = new Set();
const revokedJtis = new Set();
const bump = (map, key) => { map[key] = (map[key] ?? 0) + 1; };

// ---------------------------------------------------------------- helpers
function listen(server) {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(server.address().port));
  });
}
// The serialized URL without fragment and one trailing slash (as the SDK compares resources).
const comparable = (value) => String(value).replace(/#.*$/s, '').replace(/\/$/, '');
const LOOPBACKS = new Set(['127.0.0.1', 'localhost', '[::1]']);

// ---------------------------------------------------------------- authorization server
const asServer = http.createServer();
const asPort = await listen(asServer);
const issuer = `http://127.0.0.1:${asPort}`;
let resource; // the MCP server's URL, known once it listens (before any request is served)

const { privateKey } = await jose.generateKeyPair('RS256', { extractable: true });
const signingKey = { ...(await jose.exportJWK(privateKey)), kid: randomUUID(), alg: 'RS256', use: 'sig' };

const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const JWT_BEARER = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
const TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:';
const clients = [];
if (opts.subject_jwks) {
  clients.push({
    client_id: opts.exchange_client_id,
    client_secret: opts.exchange_client_secret,
    grant_types: [TOKEN_EXCHANGE],
    response_types: [],
    redirect_uris: [],
    token_endpoint_auth_method: 'client_secret_basic',
  });
}
if (opts.client_id) {
  const client = {
    client_id: opts.client_id,
    application_type: opts.application_type,
    redirect_uris: opts.redirect_uris.split(',').map((u) => u.trim()).filter(Boolean),
    grant_types: ['authorization_code', 'refresh_token', ...(opts.subject_jwks ? [JWT_BEARER] : [])],
    response_types: ['code'],
    token_endpoint_auth_method: opts.client_secret ? opts.client_auth_method : 'none',
  };
  if (opts.client_secret) client.client_secret = opts.client_secret;
  clients.push(client);
}

const provider = new Provider(issuer, {
  clients,
  jwks: { keys: [signingKey] },
  cookies: { keys: [randomBytes(32).toString('base64url')] },
  responseTypes: ['code'],
  // The MCP scopes must be known to the provider too, not only to the resource server:
  // registration (RFC 7591) refuses client metadata whose `scope` names any other value, and
  // the SDK's client (like most MCP clients) registers with PRM's scopes_supported as `scope`.
  scopes: ['openid', 'offline_access', ...opts.resource_scopes.split(' ').filter(Boolean)],
  pkce: { required: () => true }, // S256 is the only method oidc-provider 9 implements
  findAccount: async (ctx, sub) => ({ accountId: sub, claims: async () => ({ sub }) }),
  // An exchanged token says who acts for its subject (RFC 8693 §4.1).
  // One taken for an identity assertion says so.
  extraTokenClaims: async (ctx, token) => {
    if (token.gty === 'token_exchange') return { act: { sub: token.clientId } };
    if (token.gty === 'jwt_bearer') return { via: 'id-jag' };
    return undefined;
  },
  // Refresh tokens whenever the client may use the refresh_token grant (no offline_access
  // scope, no prompt=consent needed); they do not end with the provider's browser session.
  issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
  expiresWithSession: async () => false,
  rotateRefreshToken: (ctx) => {
    if (opts.rotate_refresh_tokens === 'always') return true;
    if (opts.rotate_refresh_tokens === 'never') return false;
    const { RefreshToken: token, Client: client } = ctx.oidc.entities;
    return client.clientAuthMethod === 'none' || token.ttlPercentagePassed() >= 70;
  },
  ttl: {
    AccessToken: () => seconds(opts.access_token_ttl),
    RefreshToken: () => seconds(opts.refresh_token_ttl),
    AuthorizationCode: 60,
    IdToken: 3600,
    Interaction: 600,
    Session: 3600,
    Grant: 3600,
  },
  features: {
    devInteractions: { enabled: true }, // bypassed in auto/deny modes (see asServer below)
    dPoP: { enabled: false }, // plain Bearer tokens
    revocation: { enabled: true },
    registration: { enabled: on(opts.registration), initialAccessToken: false },
    clientIdMetadataDocument: on(opts.cimd)
      // draft-02 is the version 9.13.3 implements; a wrong ack makes the constructor throw.
      // Cache documents for 0 s, so a document PUT again applies to the next request.
      ? { enabled: true, ack: 'draft-02', cacheDuration: { min: 0, max: 0 } }
      : { enabled: false },
    resourceIndicators: {
      enabled: true,
      defaultResource: async (ctx, client, oneOf) => oneOf,
      useGrantedResource: async () => on(opts.use_granted_resource),
      getResourceServerInfo: async (ctx, indicator) => {
        const known = [resource, opts.extra_resource].filter(Boolean);
        const audience = known.find((r) => comparable(r) === comparable(indicator));
        if (!audience) {
          throw new errors.InvalidTarget(`unknown resource ${indicator}`);
        }
        return {
          scope: opts.resource_scopes,
          audience,
          accessTokenTTL: seconds(opts.access_token_ttl),
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'RS256' } },
        };
      },
    },
  },
  // Outgoing requests (client ID metadata documents). oidc-provider passes an SSRF-guarding
  // dispatcher that refuses loopback addresses, and a client_id must be an https URL: for a
  // loopback-only test, drop the guard and fetch https://127.0.0.1:P/... over plain http.
  fetch: async (url, options) => {
    const target = new URL(url);
    delete options.dispatcher;
    if (on(opts.cimd_loopback_http) && target.protocol === 'https:' && LOOPBACKS.has(target.hostname)) {
      target.protocol = 'http:';
    }
    if (!LOOPBACKS.has(target.hostname)) throw new Error(`refusing to fetch ${url}: not loopback`);
    return fetch(target, options);
  },
});

// The token exchange grant: the subject token must be a JWT of the configured issuer, signed
// with a key of its JWKS and unexpired; the new token is for the same subject, with the MCP
// server's audience (the `resource` asked for), and says which client acts (`act`).
if (opts.subject_jwks) {
  // The MCP server, as the resource server of the tokens these grants issue.
  const mcpResourceServer = () => new provider.ResourceServer(resource, {
    scope: opts.resource_scopes,
    audience: resource,
    accessTokenTTL: seconds(opts.access_token_ttl),
    accessTokenFormat: 'jwt',
    jwt: { sign: { alg: 'RS256' } },
  });
  const subjectKeys = jose.createRemoteJWKSet(new URL(opts.subject_jwks));
  provider.registerGrantType(TOKEN_EXCHANGE, async (ctx) => {
    const { params, client } = ctx.oidc;
    if (![`${TOKEN_TYPE}access_token`, `${TOKEN_TYPE}jwt`].includes(params.subject_token_type)) {
      throw new errors.InvalidRequest(`unsupported subject_token_type ${params.subject_token_type}`);
    }
    const requested = params.requested_token_type || `${TOKEN_TYPE}access_token`;
    if (![`${TOKEN_TYPE}access_token`, `${TOKEN_TYPE}id-jag`].includes(requested)) {
      throw new errors.InvalidRequest('only access tokens and ID-JAGs are issued');
    }
    if (!on(opts.exchange)) throw new errors.InvalidGrant('the subject token is not accepted (test fixture)');
    let subject;
    try {
      ({ payload: subject } = await jose.jwtVerify(params.subject_token, subjectKeys, { issuer: opts.subject_issuer }));
    } catch (error) {
      throw new errors.InvalidGrant(`the subject token is invalid: ${error.code ?? error.message}`);
    }
    const indicator = Array.isArray(params.resource) ? params.resource[0] : params.resource;
    if (!indicator || comparable(indicator) !== comparable(resource)) {
      throw new errors.InvalidTarget(`unknown resource ${indicator}`);
    }
    const known = new Set(opts.resource_scopes.split(' '));
    const scope = String(params.scope ?? '').split(' ').filter((s) => known.has(s)).join(' ') || undefined;
    stats.as.exchanges.push({ sub: subject.sub, client_id: client.clientId, requested, audience: params.audience ?? null, resource: indicator });
    if (requested === `${TOKEN_TYPE}id-jag`) {
      // For this provider as the upstream's authorization server, naming the client it knows.
      if (params.audience !== issuer) throw new errors.InvalidTarget(`unknown audience ${params.audience}`);
      const assertion = await new jose.SignJWT({ sub: subject.sub, client_id: opts.client_id, resource, scope, jti: randomUUID() })
        .setProtectedHeader({ alg: 'RS256', typ: 'oauth-id-jag+jwt', kid: signingKey.kid })
        .setIssuer(issuer).setAudience(issuer).setIssuedAt().setExpirationTime('300s')
        .sign(privateKey);
      ctx.body = { access_token: assertion, issued_token_type: `${TOKEN_TYPE}id-jag`, token_type: 'N_A', expires_in: 300, scope };
      return;
    }
    const token = new provider.AccessToken({
      accountId: subject.sub,
      client,
      scope,
      gty: 'token_exchange',
      resourceServer: mcpResourceServer(),
    });
    ctx.oidc.entity('AccessToken', token);
    const value = await token.save();
    ctx.body = {
      access_token: value,
      issued_token_type: `${TOKEN_TYPE}access_token`,
      token_type: 'Bearer',
      expires_in: token.expiration,
      scope: token.scope,
    };
  }, ['subject_token', 'subject_token_type', 'requested_token_type', 'audience', 'resource', 'scope', 'actor_token', 'actor_token_type'], ['resource']);

  // The JWT bearer grant, taking an ID-JAG this provider issued for itself, from the client
  // it names, for an access token of the MCP server's audience.
  const publicKey = await jose.importJWK({ kty: signingKey.kty, n: signingKey.n, e: signingKey.e }, 'RS256');
  provider.registerGrantType(JWT_BEARER, async (ctx) => {
    const { params, client } = ctx.oidc;
    let claims;
    try {
      ({ payload: claims } = await jose.jwtVerify(params.assertion, publicKey, { issuer, audience: issuer, typ: 'oauth-id-jag+jwt' }));
    } catch (error) {
      throw new errors.InvalidGrant(`the assertion is invalid: ${error.code ?? error.message}`);
    }
    if (claims.client_id !== client.clientId) throw new errors.InvalidGrant('the assertion names another client');
    const indicator = Array.isArray(params.resource) ? params.resource[0] : params.resource;
    if (comparable(indicator ?? claims.resource) !== comparable(resource)) throw new errors.InvalidTarget('unknown resource');
    const token = new provider.AccessToken({
      accountId: claims.sub,
      client,
      scope: claims.scope,
      gty: 'jwt_bearer',
      resourceServer: mcpResourceServer(),
    });
    ctx.oidc.entity('AccessToken', token);
    const value = await token.save();
    stats.as.assertions.push({ sub: claims.sub, client_id: client.clientId, resource: indicator ?? null });
    ctx.body = { access_token: value, token_type: 'Bearer', expires_in: token.expiration, scope: token.scope };
  }, ['assertion', 'scope', 'resource'], ['resource']);
}

provider.on('authorization.success', () => { stats.as.authorizations += 1; });
// oidc-provider answers e.g. a bad code_verifier with a bare "invalid_grant / grant request is
// invalid"; the reason is in err.error_detail, kept here and logged for debugging tests.
const detail = (err) => ({ error: err.error ?? err.message, error_description: err.error_description, error_detail: err.error_detail });
provider.on('authorization.error', (ctx, err) => {
  bump(stats.as.authorization_errors, err.error ?? err.message);
  stats.as.last_error = detail(err);
  console.error('authorization error', JSON.stringify(detail(err)));
});
provider.on('grant.success', (ctx) => bump(stats.as.tokens, ctx.oidc.params.grant_type));
provider.on('grant.error', (ctx, err) => {
  bump(stats.as.token_errors, err.error ?? err.message);
  stats.as.last_error = detail(err);
  console.error('token error', JSON.stringify(detail(err)));
});
provider.on('registration_create.success', () => { stats.as.registrations += 1; });
provider.on('grant.revoked', () => { stats.as.grants_revoked += 1; });
provider.on('access_token.issued', (token) => {
  stats.as.access_tokens_issued += 1;
  stats.as.last_access_token = { jti: token.jti, sub: token.accountId, client_id: token.clientId, aud: token.aud ?? token.resourceServer?.audience, scope: token.scope };
});
provider.on('server_error', (ctx, err) => console.error('oidc-provider server_error', err));

// Auto interactions: approve (login as `account`, consent to everything asked) or refuse.
async function autoInteraction(req, res) {
  const details = await provider.interactionDetails(req, res);
  const { prompt, params, session, grantId } = details;
  if (opts.interactions === 'deny') {
    return provider.interactionFinished(req, res, {
      error: 'access_denied', error_description: 'End-User denied the request (test fixture)',
    }, { mergeWithLastSubmission: false });
  }
  if (prompt.name === 'login') {
    return provider.interactionFinished(req, res, { login: { accountId: params.login_hint || opts.account } }, { mergeWithLastSubmission: false });
  }
  const grant = grantId
    ? await provider.Grant.find(grantId)
    : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
  if (prompt.details.missingOIDCScope) grant.addOIDCScope(prompt.details.missingOIDCScope.join(' '));
  if (prompt.details.missingOIDCClaims) grant.addOIDCClaims(prompt.details.missingOIDCClaims);
  for (const [indicator, scopes] of Object.entries(prompt.details.missingResourceScopes ?? {})) {
    grant.addResourceScope(indicator, scopes.join(' '));
  }
  return provider.interactionFinished(req, res, { consent: { grantId: await grant.save() } }, { mergeWithLastSubmission: true });
}

const providerCallback = provider.callback();
asServer.on('request', (req, res) => {
  if (opts.token_endpoint === 'down' && req.method === 'POST' && req.url.split('?')[0] === '/token') {
    stats.as.token_outages += 1;
    res.writeHead(503, { 'content-type': 'text/html' });
    res.end('<html><body><h1>503 Service Unavailable</h1></body></html>');
    return;
  }
  if (opts.interactions !== 'dev' && /^\/interaction\/[^/]+$/.test(req.url.split('?')[0]) && req.method === 'GET') {
    autoInteraction(req, res).catch((err) => {
      console.error('auto interaction failed', err);
      res.statusCode = 400;
      res.end(String(err?.message ?? err));
    });
    return;
  }
  providerCallback(req, res);
});

// ---------------------------------------------------------------- MCP server
const mcpHttp = http.createServer();
const mcpPort = await listen(mcpHttp);
const mcpBase = `http://127.0.0.1:${mcpPort}`;
resource = `${mcpBase}${opts.mcp_path}`;
const resourceMetadataUrl = getOAuthProtectedResourceMetadataUrl(new URL(resource));
const control = `${mcpBase}/control`;

const asMetadata = await (await fetch(`${issuer}/.well-known/oauth-authorization-server`)).json();
const jwks = jose.createRemoteJWKSet(new URL(asMetadata.jwks_uri));
const requiredScopes = opts.required_scopes.split(' ').filter(Boolean);

const verifier = {
  async verifyAccessToken(token) {
    let payload;
    try {
      ({ payload } = await jose.jwtVerify(token, jwks, {
        issuer, audience: resource, typ: 'at+jwt', algorithms: ['RS256'],
      }));
    } catch (error) {
      // The SDK puts this text into `error_description="..."` unescaped: keep it quote-free.
      throw new InvalidTokenError(`${error.code ?? 'ERR_INVALID'}: ${error.message}`.replace(/["\\]/g, "'"));
    }
    if (revokedJtis.has(payload.jti)) throw new InvalidTokenError('Token was invalidated by the test');
    if (on(opts.accept_only_exchanged) && !payload.act && payload.via !== 'id-jag') throw new InvalidTokenError('only exchanged tokens are accepted here');
    stats.mcp.verified += 1;
    if (!seenJtis.has(payload.jti)) {
      seenJtis.add(payload.jti);
      stats.mcp.tokens_seen += 1;
    }
    return {
      token,
      clientId: payload.client_id,
      scopes: payload.scope ? payload.scope.split(' ') : [],
      expiresAt: payload.exp,
      resource: new URL(Array.isArray(payload.aud) ? payload.aud[0] : payload.aud),
      extra: { sub: payload.sub, jti: payload.jti, iat: payload.iat, act: payload.act, via: payload.via },
    };
  },
};

const app = createMcpExpressApp({ host: '127.0.0.1' }); // Host header check + express.json()
app.use(mcpAuthMetadataRouter({
  oauthMetadata: asMetadata,
  resourceServerUrl: new URL(resource),
  scopesSupported: opts.resource_scopes.split(' ').filter(Boolean),
  resourceName: 'Switchyard OAuth test upstream',
}));
if (on(opts.prm_root) && opts.mcp_path !== '/') {
  app.get('/.well-known/oauth-protected-resource', (req, res) => res.json({
    resource, authorization_servers: [issuer], scopes_supported: opts.resource_scopes.split(' ').filter(Boolean),
  }));
}

// Control endpoints (test only, no auth).
const cimdDocuments = new Map();
app.get('/control/stats', (req, res) => res.json({ ...stats, config: opts }));
app.post('/control/reset', (req, res) => {
  for (const side of [stats.as, stats.mcp]) {
    for (const [k, v] of Object.entries(side)) side[k] = typeof v === 'number' ? 0 : (v === null ? null : (Array.isArray(v) ? [] : {}));
  }
  stats.as.last_access_token = null;
  stats.as.last_error = null;
  res.json({ ok: true });
});
app.post('/control/config', (req, res) => {
  for (const [key, value] of Object.entries(req.body ?? {})) {
    if (!['access_token_ttl', 'refresh_token_ttl', 'rotate_refresh_tokens', 'interactions', 'account', 'use_granted_resource', 'token_endpoint', 'extra_resource', 'exchange'].includes(key)) {
      return res.status(400).json({ error: `cannot change ${key} at run time` });
    }
    opts[key] = String(value);
  }
  return res.json(opts);
});
// Every access token the MCP server has accepted so far is refused from now on (as if revoked).
app.post('/control/invalidate-tokens', (req, res) => {
  for (const jti of seenJtis) revokedJtis.add(jti);
  res.json({ invalidated: revokedJtis.size });
});
// Announces an update of resource `uri` to the sessions subscribed to it; how many were told.
app.post('/control/touch', async (req, res) => {
  const uri = String(req.query.uri ?? '');
  let told = 0;
  for (const id of subscribed.get(uri) ?? []) {
    const session = sessions.get(id);
    if (!session) continue;
    await session.server.server.sendResourceUpdated({ uri });
    told += 1;
  }
  res.json({ told });
});
// Client ID metadata documents: PUT a JSON document here, use https://127.0.0.1:<port>/cimd/<name>
// as client_id (its client_id member must say exactly that).
app.put('/control/cimd/:name', (req, res) => { cimdDocuments.set(req.params.name, req.body); res.status(204).end(); });
app.get('/cimd/:name', (req, res) => {
  stats.mcp.cimd_fetches += 1;
  const doc = cimdDocuments.get(req.params.name);
  if (!doc) return res.status(404).json({ error: 'no such document' });
  return res.set('cache-control', 'max-age=0').json(doc);
});

// The MCP endpoint: count, authenticate, then hand to the session's transport.
app.use(opts.mcp_path, (req, res, next) => {
  stats.mcp.requests += 1;
  res.on('finish', () => {
    if (res.statusCode === 401 || res.statusCode === 403) {
      stats.mcp.rejected += 1;
      const header = String(res.getHeader('www-authenticate') ?? '');
      bump(stats.mcp.rejected_by, /error_description="([^"]*)"/.exec(header)?.[1] ?? `status ${res.statusCode}`);
    }
  });
  next();
});
app.use(opts.mcp_path, requireBearerAuth({
  verifier, requiredScopes, resourceMetadataUrl, expectedResource: new URL(resource),
}));

const sessions = new Map(); // session id -> { transport, sub, server }
const callsBySubject = new Map();
const subscribed = new Map(); // uri -> Set of session ids

function newServer(sub) {
  const server = new McpServer(
    { name: 'switchyard-oauth-upstream', version: '1.0.0' },
    { capabilities: { resources: { subscribe: true } } },
  );
  const own = `notes://${sub}/private`;
  server.registerResource('private-notes', own, { description: `The private notes of ${sub}` }, async (uri) => ({
    contents: [{ uri: uri.href, text: `private notes of ${sub}` }],
  }));
  server.server.setRequestHandler(SubscribeRequestSchema, async (request, extra) => {
    stats.mcp.subscriptions.push({ uri: request.params.uri, sub: extra.authInfo?.extra?.sub });
    const ids = subscribed.get(request.params.uri) ?? new Set();
    ids.add(extra.sessionId);
    subscribed.set(request.params.uri, ids);
    return {};
  });
  server.server.setRequestHandler(UnsubscribeRequestSchema, async (request, extra) => {
    subscribed.get(request.params.uri)?.delete(extra.sessionId);
    return {};
  });
  server.registerTool('whoami', {
    description: 'Who the access token says the caller is, and how often this subject called.',
  }, async (extra) => {
    stats.mcp.tool_calls += 1;
    const auth = extra.authInfo;
    const sub = auth?.extra?.sub;
    const calls = (callsBySubject.get(sub) ?? 0) + 1;
    callsBySubject.set(sub, calls);
    const answer = {
      sub, client_id: auth?.clientId, scopes: auth?.scopes, jti: auth?.extra?.jti, exp: auth?.expiresAt, act: auth?.extra?.act ?? null, via: auth?.extra?.via ?? null, calls,
    };
    return { content: [{ type: 'text', text: JSON.stringify(answer) }], structuredContent: answer };
  });
  return server;
}

// The legacy HTTP+SSE transport: a stream per session, messages posted beside it, both with a
// token of the same subject.
const legacy = new Map(); // session id -> { transport, sub }
if (opts.transport === 'sse') {
  app.use('/messages', requireBearerAuth({
    verifier, requiredScopes, resourceMetadataUrl, expectedResource: new URL(resource),
  }));
  app.get(opts.mcp_path, async (req, res) => {
    const sub = req.auth.extra.sub;
    const transport = new SSEServerTransport('/messages', res);
    legacy.set(transport.sessionId, { transport, sub });
    stats.mcp.sessions_opened += 1;
    res.on('close', () => legacy.delete(transport.sessionId));
    await newServer(sub).connect(transport);
  });
  app.post('/messages', async (req, res) => {
    const session = legacy.get(String(req.query.sessionId));
    if (!session) return res.status(404).send('Session not found');
    if (session.sub !== req.auth.extra.sub) {
      stats.mcp.subject_mismatch += 1;
      return res.status(403).send('Session belongs to another subject');
    }
    return session.transport.handlePostMessage(req, res, req.body);
  });
}

app.all(opts.mcp_path, async (req, res) => {
  const sub = req.auth.extra.sub;
  const id = req.get('mcp-session-id');
  if (id) {
    const session = sessions.get(id);
    if (!session) return res.status(404).json({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null });
    if (session.sub !== sub) {
      stats.mcp.subject_mismatch += 1;
      return res.status(403).json({ jsonrpc: '2.0', error: { code: -32003, message: 'Session belongs to another subject' }, id: null });
    }
    return session.transport.handleRequest(req, res, req.body);
  }
  if (req.method !== 'POST' || !isInitializeRequest(req.body)) {
    return res.status(400).json({ jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: no session' }, id: null });
  }
  const transport = new StreamableHTTPServerTransport({
    sessionIdGenerator: () => randomUUID(),
    onsessioninitialized: (sessionId) => {
      sessions.set(sessionId, { transport, sub, server });
      stats.mcp.sessions_opened += 1;
    },
    onsessionclosed: (sessionId) => sessions.delete(sessionId),
  });
  const server = newServer(sub);
  transport.onclose = () => {
    for (const ids of subscribed.values()) ids.delete(transport.sessionId);
  };
  await server.connect(transport);
  return transport.handleRequest(req, res, req.body);
});

mcpHttp.on('request', app);

// ---------------------------------------------------------------- ready
const client = opts.client_id ? {
  client_id: opts.client_id,
  client_secret: opts.client_secret || undefined,
  token_endpoint_auth_method: clients[0].token_endpoint_auth_method,
  redirect_uris: clients[0].redirect_uris,
} : null;
process.stdout.write(`${JSON.stringify({
  issuer,
  authorization_endpoint: asMetadata.authorization_endpoint,
  token_endpoint: asMetadata.token_endpoint,
  registration_endpoint: asMetadata.registration_endpoint ?? null,
  jwks_uri: asMetadata.jwks_uri,
  mcp: resource,
  resource,
  resource_metadata: resourceMetadataUrl,
  control,
  client,
  pid: process.pid,
})}\n`);

const stop = () => { asServer.close(); mcpHttp.close(); process.exit(0); };
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
// Exit when the test that started us goes away: when stdin is a pipe (Rust's Stdio::piped())
// and its writing end closes. A shell's `&` gives /dev/null, which is not watched.
if (fstatSync(0).isFIFO()) {
  process.stdin.on('end', stop);
  process.stdin.resume();
}
