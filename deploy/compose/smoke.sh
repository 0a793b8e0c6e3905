#!/usr/bin/env bash
# The compose stack without a container engine: the three gateways (the built binary), Redis
# and nginx wired as compose.yaml wires them, by the same names (a private /etc/hosts), with
# this folder's switchyard.toml and nginx.conf, in a network and mount namespace of its own
# (nothing listens outside it). Checks with curl that a session goes round the replicas and
# that the admin listener takes Prometheus's names and the token. Needs root (unshare),
# redis-server, nginx, curl, openssl; SWITCHYARD_BIN (default: the debug build).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [ -z "${SMOKE_INSIDE:-}" ]; then
  exec env SMOKE_INSIDE=1 unshare --net --mount "$0" "$@"
fi
B="${SWITCHYARD_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/switchyard/target}/debug/switchyard}"
D="$here"
work="$(mktemp -d)"
ip link set lo up
printf '127.0.0.1 localhost redis\n127.0.0.11 gateway-1\n127.0.0.12 gateway-2\n127.0.0.13 gateway-3\n' > $work/hosts
mount --bind $work/hosts /etc/hosts
redis-server --port 6379 --bind 127.0.0.1 --save '' --appendonly no > $work/redis.log 2>&1 &
redis=$!
sleep 0.5
export SWITCHYARD_REDIS_URL=redis://redis:6379/0
export SWITCHYARD_SESSION_KEY=$(openssl rand -base64 32)
export SWITCHYARD_ADMIN_TOKEN=$(openssl rand -hex 24)
KEY=$(openssl rand -hex 24)
export SWITCHYARD_API_KEY_SHA256=$(printf %s "$KEY" | $B hash-key | cut -d'"' -f2)
pids=()
for n in 1 2 3; do
  XDG_STATE_HOME=$work/state$n $B run -c $D/switchyard.toml --listen 127.0.0.1$n:8080 --admin-listen 127.0.0.1$n:9090 > $work/gw$n.log 2>&1 &
  pids+=($!)
done
sed 's/listen 8080;/listen 127.0.0.1:8080;/' $D/nginx.conf > $work/nginx.conf
mkdir -p $work/ngx/logs
nginx -p $work/ngx -c $work/nginx.conf -g "daemon off; pid $work/ngx/nginx.pid;" > $work/nginx.log 2>&1 &
ngx=$!
for n in 1 2 3; do
  ready=""
  for i in $(seq 150); do
    if curl -sf -H 'Host: localhost' http://gateway-$n:8080/healthz | grep -q '"tools":6'; then ready=1; break; fi
    sleep 0.2
  done
  if [ -z "$ready" ]; then
    echo "gateway-$n did not become ready:" >&2
    tail -n 20 "$work/gw$n.log" >&2
    exit 1
  fi
done
for i in $(seq 50); do curl -s -o /dev/null http://localhost:8080/healthz && break; sleep 0.1; done
H=(-H 'content-type: application/json' -H 'accept: application/json, text/event-stream' -H "authorization: Bearer $KEY")
sid=$(curl -s -D - -o /dev/null "${H[@]}" http://localhost:8080/mcp -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}' | tr -d '\r' | sed -n 's/^mcp-session-id: //Ip')
echo "session: ${sid:0:12}…"
H+=(-H "mcp-session-id: $sid" -H 'mcp-protocol-version: 2025-11-25')
curl -s -o /dev/null -w 'initialized: %{http_code}\n' "${H[@]}" http://localhost:8080/mcp -d '{"jsonrpc":"2.0","method":"notifications/initialized"}'
failed=0
expect() { # NAME WANTED GOT
  if [ "$2" = "$3" ]; then echo "ok: $1 ($3)"; else echo "FAILED: $1: wanted $2, got $3" >&2; failed=1; fi
}
for i in 1 2 3 4 5 6; do
  got=$(curl -s "${H[@]}" http://localhost:8080/mcp -d "{\"jsonrpc\":\"2.0\",\"id\":$((i+1)),\"method\":\"tools/call\",\"params\":{\"name\":\"demo__add\",\"arguments\":{\"a\":$i,\"b\":40}}}" | grep -o '"structuredContent":{[^}]*}' || true)
  expect "call $i through the balancer" "\"structuredContent\":{\"sum\":$((i + 40)).0}" "$got"
done
metric() { # N NAME
  curl -s -H "authorization: Bearer $SWITCHYARD_ADMIN_TOKEN" "http://gateway-$1:9090/metrics" | sed -n "s/^$2 //p"
}
for n in 1 2 3; do
  expect "gateway-$n sees Redis (scraped by its name)" 1 "$(metric $n switchyard_store_up)"
done
for n in 2 3; do
  expect "gateway-$n served the session opened elsewhere" 1 "$(metric $n switchyard_sessions_resumed_total)"
done
expect "/metrics without the token" 401 "$(curl -s -o /dev/null -w '%{http_code}' http://gateway-1:9090/metrics)"
expect "the admin listener by an unlisted name" 403 "$(curl -s -o /dev/null -w '%{http_code}' -H "authorization: Bearer $SWITCHYARD_ADMIN_TOKEN" -H 'Host: evil.example:9090' http://gateway-1:9090/metrics)"
expect "the endpoint by an unlisted name" 403 "$(curl -s -o /dev/null -w '%{http_code}' "${H[@]}" -H 'Host: evil.example' http://localhost:8080/mcp -d '{"jsonrpc":"2.0","id":99,"method":"tools/list"}')"
kill $ngx "${pids[@]}"; wait "${pids[@]}" 2>/dev/null || true
kill "$redis"
rm -rf "$work"
exit "$failed"
