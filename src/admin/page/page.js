// Switchyard live status page: follows api/events (server-sent events, read with fetch so that
// the token goes in a header) and reads api/status whole when the stream opens and after each
// state event; the traffic counters come in the stream. Nothing is polled.
// Every server-provided string goes through textContent or an attribute, never innerHTML.
// A `#token=...` in the address is kept in sessionStorage and sent as a Bearer token.
(function () {
  "use strict";

  const FETCH_TIMEOUT_MS = 4000;
  const REFRESH_AFTER_MS = 50; // state events in a burst are read as one
  const RETRY_MS = 2000; // before following again, once the stream ended
  const CLOCK_MS = 1000; // the ages shown ("12 s ago") are kept current locally
  const MIN_RATE_WINDOW_S = 0.5; // counters read right after others would give noisy rates
  const TOKEN_KEY = "switchyard.admin.token";
  const STATES = ["connecting", "connected", "discovering", "ready", "authenticating", "failed", "draining"];
  const OUTCOMES = ["applied", "rejected", "unchanged"];
  const COLUMNS = ["name", "state", "transport", "target", "session", "protocol",
    "tools", "prompts", "resources", "in_flight", "last_error", "retries", "actions"];
  const NUMERIC = ["tools", "prompts", "resources", "in_flight", "retries"];
  const LONG = ["target", "last_error"]; // cut with an ellipsis; the full text is the title
  const RATES = [["t-rps", "requests_total"], ["t-eps", "errors_total"], ["t-tps", "tool_calls_total"]];
  const GAUGES = [["t-inflight", "requests_in_flight"], ["t-sessions", "sessions"], ["t-streams", "streams"]];

  const byId = (id) => document.getElementById(id);
  const rows = new Map(); // upstream name -> {tr, cells, badge, since, auth}
  const listKeys = {}; // list id -> JSON of what it shows, so lists are rebuilt only on change
  let token = null;
  let prev = null; // {at, traffic} of the last counters, for the rates
  let started = null; // when the gateway started (Unix seconds)
  let lastEventId = null; // where a stream that ended is taken up again
  let following = null; // the AbortController of the stream being read
  let refreshTimer = null;
  let refreshing = false;
  let refreshAgain = false;

  // === Helpers ===

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  // Touches the DOM only on change, so aria-live regions announce real changes only.
  function setText(node, value) {
    const text = value === undefined || value === null ? "" : String(value);
    if (node.textContent !== text) node.textContent = text;
  }

  const isMissing = (value) => value === undefined || value === null || value === "";
  const show = (value) => (isMissing(value) ? "–" : value);
  const nowSeconds = () => Date.now() / 1000;
  const badgeClass = (kind, value, known) => "badge " + kind + "-" + (known.includes(value) ? value : "unknown");

  // 4000 -> "1 h 6 min", or "1 h" when coarse.
  function human(seconds, coarse) {
    const s = Math.max(0, Math.floor(seconds));
    for (const [size, name, sub, subName] of [[86400, "d", 3600, "h"], [3600, "h", 60, "min"], [60, "min", 1, "s"]]) {
      if (s >= size) return Math.floor(s / size) + " " + name + (coarse ? "" : " " + Math.floor((s % size) / sub) + " " + subName);
    }
    return s + " s";
  }

  // A <time> that refreshTimes() keeps current: "12 s ago", or "for 12 s" with class "for".
  function setTime(node, at) {
    const seconds = at === null ? NaN : Number(at);
    if (!Number.isFinite(seconds)) { delete node.dataset.at; setText(node, ""); return node; }
    if (node.dataset.at !== String(seconds)) {
      node.dataset.at = String(seconds);
      node.dateTime = new Date(seconds * 1000).toISOString();
      node.title = new Date(seconds * 1000).toLocaleString();
    }
    const age = nowSeconds() - seconds;
    setText(node, node.classList.contains("for") ? "for " + human(age, false) : human(age, true) + " ago");
    return node;
  }

  function refreshTimes() {
    for (const node of document.querySelectorAll("time[data-at]")) setTime(node, node.dataset.at);
  }

  // Only http(s) URLs become an Authorize link: the URL comes from the server and ends up in href.
  function safeUrl(text) {
    if (typeof text !== "string" || text === "") return null;
    let url;
    try { url = new URL(text, location.href); } catch (_) { return null; }
    return url.protocol === "https:" || url.protocol === "http:" ? url.href : null;
  }

  // === Auth and fetching ===

  function takeTokenFromHash() {
    const match = /(?:^#|&)token=([^&]*)/.exec(location.hash);
    if (!match) return;
    try { token = decodeURIComponent(match[1]); } catch (_) { token = match[1]; }
    try { sessionStorage.setItem(TOKEN_KEY, token); } catch (_) { /* no storage: kept in this page only */ }
    history.replaceState(null, "", location.pathname + location.search); // out of the address bar
  }

  async function api(method, path, json) {
    const headers = { Accept: "application/json" };
    if (token) headers.Authorization = "Bearer " + token;
    if (json !== undefined) headers["Content-Type"] = "application/json";
    const sent = json === undefined ? undefined : JSON.stringify(json);
    const abort = new AbortController();
    const timeout = setTimeout(() => abort.abort(), FETCH_TIMEOUT_MS);
    try {
      const res = await fetch(path, { method, headers, body: sent, cache: "no-store", signal: abort.signal });
      const body = await res.json().catch(() => null);
      return { status: res.status, body };
    } finally {
      clearTimeout(timeout);
    }
  }

  const isAuthFailure = (status) => status === 401 || status === 403;

  function showAuthNotice(visible) {
    byId("auth-notice").hidden = !visible;
    if (!visible) return;
    setText(byId("auth-detail"), token ? "The token this tab sent was refused." : "This tab has no token yet.");
    setText(byId("auth-example"), location.origin + location.pathname + "#token=YOUR_TOKEN");
  }

  // kind: pending | live | down | auth, exposed as #conn[data-conn] for CSS and tests.
  function setConnection(kind, text) {
    const conn = byId("conn");
    conn.dataset.conn = kind;
    setText(conn.querySelector(".conn-text"), text);
    document.body.classList.toggle("stale", kind !== "live");
    if (kind !== "live") prev = null; // rates restart from the next good counters
  }

  // === Rendering ===

  function rate(now, before, dt) {
    if (!Number.isFinite(now) || !Number.isFinite(before) || now < before) return "–"; // counters reset on restart
    const perSecond = (now - before) / dt;
    return perSecond >= 10 ? perSecond.toFixed(0) : perSecond.toFixed(1);
  }

  function renderTraffic(t) {
    const at = performance.now();
    const dt = prev ? (at - prev.at) / 1000 : 0;
    if (!prev || dt >= MIN_RATE_WINDOW_S) {
      for (const [id, key] of RATES) setText(byId(id), prev ? rate(t[key], prev.traffic[key], dt) : "–");
      byId("t-eps").classList.toggle("bad", Number(byId("t-eps").textContent) > 0);
      prev = { at, traffic: t };
    }
    for (const [id, key] of GAUGES) setText(byId(id), show(t[key]));
  }

  function makeRow(name) {
    const row = { tr: el("tr"), cells: {}, badge: el("span", "badge"), since: el("time", "since for"), auth: null };
    row.tr.dataset.upstream = name;
    for (const col of COLUMNS) {
      const cell = el(col === "name" ? "th" : "td", "col-" + col.replace("_", "-"));
      if (col === "name") cell.scope = "row";
      if (NUMERIC.includes(col)) cell.classList.add("num");
      row.cells[col] = cell;
      row.tr.append(cell);
    }
    row.cells.state.append(row.badge, " ", row.since);
    const out = el("span", "message");
    const path = (verb) => "api/upstreams/" + encodeURIComponent(name) + "/" + verb;
    row.cells.actions.append(
      postButton("Reconnect", "reconnect", path("reconnect"), "reconnecting", out),
      postButton("Rediscover", "rediscover", path("rediscover"), "listing again", out),
      postButton("Disable", "disable", path("disable"), "switched off", out),
      out);
    return row;
  }

  // A button that POSTs to `path` of the admin API and says in `out` how it went.
  function postButton(label, action, path, done, out, json) {
    const button = el("button", "act", label);
    button.type = "button";
    button.dataset.action = action;
    button.addEventListener("click", async () => {
      button.disabled = true;
      try {
        const res = await api("POST", path, json);
        if (isAuthFailure(res.status)) showAuthNotice(true);
        setText(out, res.status < 300 ? done : ((res.body && res.body.error) || "HTTP " + res.status));
      } catch (_) {
        setText(out, "admin API unreachable");
      } finally {
        button.disabled = false;
        refresh();
      }
    });
    return button;
  }

  function disabledItem(name) {
    const li = el("li");
    li.dataset.upstream = String(name);
    const out = el("span", "message");
    li.append(el("span", "tag", String(name)),
      postButton("Enable", "enable", "api/upstreams/" + encodeURIComponent(name) + "/enable", "switched on", out),
      out);
    return li;
  }

  // The Authorize link exists only while the upstream waits for a person to authorize it.
  function updateAuthorize(row, server) {
    const url = server.state === "authenticating" ? safeUrl(server.auth_url) : null;
    if (!url) { row.auth?.remove(); row.auth = null; return; }
    if (!row.auth) {
      row.auth = el("a", "authorize", "Authorize");
      row.auth.target = "_blank";
      row.auth.rel = "noopener";
      row.cells.state.append(row.auth);
    }
    if (row.auth.getAttribute("href") !== url) row.auth.href = url;
    row.auth.title = "Open the authorization page of " + new URL(url).host;
  }

  function updateRow(row, s) {
    const state = typeof s.state === "string" ? s.state : "unknown";
    if (row.tr.dataset.state !== state) row.tr.dataset.state = state;
    const cls = badgeClass("state", state, STATES);
    if (row.badge.className !== cls) row.badge.className = cls;
    setText(row.badge, state);
    setTime(row.since, s.since);
    updateAuthorize(row, s);
    const counts = s.counts || {};
    const sandbox = s.sandbox && typeof s.sandbox === "object" ? s.sandbox : null;
    const missing = sandbox && Array.isArray(sandbox.missing) ? sandbox.missing : [];
    const values = {
      name: s.name, transport: transportText(s.transport, sandbox, missing), target: s.target, session: s.session,
      protocol: s.protocol_version, tools: counts.tools, prompts: counts.prompts, resources: counts.resources,
      in_flight: s.in_flight, last_error: s.last_error, retries: s.retries,
    };
    for (const [col, value] of Object.entries(values)) setText(row.cells[col], show(value));
    for (const col of LONG) row.cells[col].title = isMissing(values[col]) ? "" : String(values[col]);
    row.cells.resources.title = counts.resource_templates ? "and " + counts.resource_templates + " resource templates" : "";
    row.cells.retries.classList.toggle("warn", Number(s.retries) > 0);
    row.cells.transport.title = sandbox && Array.isArray(sandbox.enforced)
      ? "enforced: " + (sandbox.enforced.join(", ") || "nothing") : "";
    row.cells.transport.classList.toggle("warn", missing.length > 0);
  }

  // A sandboxed stdio server's transport says so, and what this kernel cannot enforce of it.
  function transportText(transport, sandbox, missing) {
    if (isMissing(transport) || !sandbox) return transport;
    return transport + (missing.length ? ", sandboxed without " + missing.join(", ") : ", sandboxed");
  }

  // Rows are keyed by name and updated in place, in the order the server gives.
  function renderServers(servers) {
    const body = byId("upstreams");
    const seen = new Set();
    servers.forEach((server, i) => {
      const name = String(server.name);
      const row = rows.get(name) || makeRow(name);
      rows.set(name, row);
      seen.add(name);
      updateRow(row, server);
      if (body.children[i] !== row.tr) body.insertBefore(row.tr, body.children[i] || null);
    });
    for (const [name, row] of rows) if (!seen.has(name)) { row.tr.remove(); rows.delete(name); }
    const ready = servers.filter((s) => s.state === "ready").length;
    byId("upstreams-empty").hidden = servers.length > 0;
    setText(byId("upstreams-summary"), servers.length ? ready + " of " + servers.length + " ready" : "");
  }

  function renderList(id, items, build) {
    const key = JSON.stringify(items);
    if (listKeys[id] === key) return;
    listKeys[id] = key;
    byId(id).replaceChildren(...items.map(build));
    byId(id + "-empty").hidden = items.length > 0;
  }

  function errorItem(e) {
    const li = el("li");
    li.append(setTime(el("time"), e.at));
    if (!isMissing(e.upstream)) li.append(el("span", "tag", e.upstream));
    li.append(el("span", "message", e.message));
    return li;
  }

  function reloadItem(r) {
    const li = el("li");
    li.dataset.outcome = String(r.outcome);
    li.append(setTime(el("time"), r.at), el("span", "tag", r.trigger),
      el("span", badgeClass("outcome", r.outcome, OUTCOMES), r.outcome));
    if (r.summary) li.append(el("span", "message", r.summary));
    const errors = Array.isArray(r.errors) ? r.errors : [];
    if (errors.length) {
      const ul = el("ul", "reload-errors");
      ul.append(...errors.map((e) => el("li", null, e)));
      li.append(ul);
    }
    return li;
  }

  function heldItem(h) {
    const li = el("li");
    li.append(setTime(el("time"), h.since), el("span", "tag", h.upstream + " / " + h.tool),
      el("span", "tag", h.kind === "new" ? "new tool" : "changed"));
    li.append(el("pre", "diff", String(h.diff || "")));
    const out = el("span", "message");
    const path = "api/tools/" + encodeURIComponent(h.upstream) + "/" + encodeURIComponent(h.tool) + "/approve";
    li.append(postButton("Approve", "approve", path, "approved", out), out);
    return li;
  }

  // A call waiting for an operator: whose, which tool, its arguments as the rule shows them;
  // a decision names the digest of these arguments, so it releases only this call.
  function approvalItem(a) {
    const li = el("li");
    li.dataset.id = String(a.id);
    li.append(setTime(el("time"), a.requested_at), el("span", "tag", a.principal),
      el("span", "tag", a.upstream + " / " + a.tool), el("span", "tag", "rule " + a.rule));
    li.append(el("pre", "diff", JSON.stringify(a.arguments, null, 2)));
    const out = el("span", "message");
    const path = "api/approvals/" + encodeURIComponent(a.id);
    const body = (decision) => ({ decision, arguments_sha256: a.arguments_sha256 });
    li.append(postButton("Allow once", "allow", path, "allowed", out, body("allow")),
      postButton("Deny", "deny", path, "denied", out, body("deny")), out);
    return li;
  }

  function rejectedItems(servers) {
    const items = [];
    for (const s of servers) {
      for (const r of Array.isArray(s.rejected) ? s.rejected : []) {
        items.push({ upstream: s.name, kind: r.kind, name: r.name, reason: r.reason });
      }
    }
    return items;
  }

  function rejectedItem(r) {
    const li = el("li");
    li.append(el("span", "tag", r.upstream), el("span", "tag", r.kind + " " + (r.name || "(no name)")),
      el("span", "message", r.reason));
    return li;
  }

  function render(s) {
    const config = s.config || {};
    setText(byId("version"), s.version ? "v" + s.version : "");
    setText(byId("config-path"), show(config.path));
    setText(byId("config-generation"), show(config.generation));
    started = Number.isFinite(s.started) ? s.started : null;
    tick();
    renderTraffic(s.traffic || {});
    renderServers(Array.isArray(s.servers) ? s.servers : []);
    renderList("disabled", Array.isArray(s.disabled) ? s.disabled : [], disabledItem);
    renderList("held", Array.isArray(s.held) ? s.held : [], heldItem);
    renderList("approvals", Array.isArray(s.approvals) ? s.approvals : [], approvalItem);
    renderList("rejected", rejectedItems(Array.isArray(s.servers) ? s.servers : []), rejectedItem);
    renderList("errors", Array.isArray(s.recent_errors) ? s.recent_errors : [], errorItem);
    renderList("reloads", Array.isArray(s.reloads) ? s.reloads : [], reloadItem);
  }

  // === Following and actions ===

  function showStatus(res) {
    if (isAuthFailure(res.status)) {
      setConnection("auth", "admin token needed");
      showAuthNotice(true);
    } else if (res.status !== 200 || !res.body || typeof res.body !== "object") {
      const why = (res.body && res.body.error) || "no status in the answer";
      setConnection("down", "admin API error: HTTP " + res.status + ", " + why);
    } else {
      showAuthNotice(false);
      try {
        render(res.body);
        setConnection("live", "live");
      } catch (err) {
        console.error(err); // a bug here, or a status shape this page does not know
        setConnection("down", "cannot show the status: " + err.message);
      }
    }
  }

  // Reads the whole status once; asked again while it runs, it reads once more after.
  async function refresh() {
    clearTimeout(refreshTimer);
    refreshTimer = null;
    if (refreshing) { refreshAgain = true; return; }
    refreshing = true;
    try {
      showStatus(await api("GET", "api/status"));
    } catch (_) {
      setConnection("down", "admin API unreachable"); // network error or timeout
    } finally {
      refreshing = false;
      if (refreshAgain) { refreshAgain = false; refresh(); }
    }
  }

  function refreshSoon() {
    if (refreshTimer === null) refreshTimer = setTimeout(refresh, REFRESH_AFTER_MS);
  }

  // The ages and the uptime, kept current between events.
  function tick() {
    setText(byId("uptime"), started === null ? "–" : human(nowSeconds() - started, false));
    refreshTimes();
  }

  // One event of the stream: `event:`, `id:` and `data:` lines.
  function parseEvent(block) {
    const event = { kind: "message", id: null, data: "" };
    for (const line of block.split("\n")) {
      const colon = line.indexOf(":");
      if (colon === 0) continue; // a comment (keep-alive)
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "event") event.kind = value;
      else if (field === "id") event.id = value;
      else if (field === "data") event.data += (event.data ? "\n" : "") + value;
    }
    return event;
  }

  function onEvent(event) {
    if (event.id) lastEventId = event.id;
    if (event.kind === "traffic") {
      try { renderTraffic(JSON.parse(event.data)); } catch (_) { /* counters come again */ }
    } else if (event.kind === "reset") {
      refresh(); // what was missed is not kept: read everything
    } else if (event.kind !== "message") {
      refreshSoon(); // upstream, reload, error, held, approved, catalog, approval_*
    }
  }

  // Follows api/events until it ends, then again from the last id after RETRY_MS.
  async function follow() {
    if (following) following.abort();
    const abort = new AbortController();
    following = abort;
    const headers = { Accept: "text/event-stream" };
    if (token) headers.Authorization = "Bearer " + token;
    if (lastEventId) headers["Last-Event-ID"] = lastEventId;
    const again = (text) => {
      if (following !== abort) return; // replaced by a newer one
      setConnection("down", text);
      setTimeout(() => { if (following === abort) follow(); }, RETRY_MS);
    };
    let res;
    try {
      res = await fetch("api/events", { headers, cache: "no-store", signal: abort.signal });
    } catch (_) {
      again("admin API unreachable; trying again");
      return;
    }
    if (isAuthFailure(res.status)) {
      setConnection("auth", "admin token needed");
      showAuthNotice(true);
      return; // a new token (#token=…) follows again
    }
    if (res.status !== 200 || !res.body) {
      again("admin API error: HTTP " + res.status + "; trying again");
      return;
    }
    refresh(); // the whole state once, now that nothing after it can be missed
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value.replace(/\r\n?/g, "\n");
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          onEvent(parseEvent(buffer.slice(0, end)));
          buffer = buffer.slice(end + 2);
        }
      }
    } catch (_) { /* aborted, or the connection dropped */ }
    again("event stream ended; following again");
  }

  // The outcome is shown in #reload-result, with data-outcome = applied|unchanged|rejected|error|pending.
  async function reload() {
    const button = byId("reload");
    const out = byId("reload-result");
    const report = (outcome, text) => { out.dataset.outcome = outcome; setText(out, text); };
    button.disabled = true;
    report("pending", "Reloading…");
    try {
      const res = await api("POST", "api/reload");
      const b = res.body || {};
      const at = new Date().toLocaleTimeString();
      if (isAuthFailure(res.status)) {
        showAuthNotice(true);
        report("error", "Not authorized: the admin API needs a token.");
      } else if (typeof b.outcome === "string") {
        const errors = Array.isArray(b.errors) && b.errors.length ? " — " + b.errors.join("; ") : "";
        report(b.outcome, "Reload " + b.outcome + " at " + at + (b.summary ? ": " + b.summary : "") + errors);
      } else {
        report("error", "Reload failed at " + at + ": " + (b.error || "HTTP " + res.status));
      }
    } catch (_) {
      report("error", "Reload failed: admin API unreachable");
    } finally {
      button.disabled = false;
      refresh();
    }
  }

  try { token = sessionStorage.getItem(TOKEN_KEY); } catch (_) { /* no storage */ }
  takeTokenFromHash();
  window.addEventListener("hashchange", () => { takeTokenFromHash(); follow(); });
  byId("reload").addEventListener("click", reload);
  setInterval(tick, CLOCK_MS);
  follow();
})();
