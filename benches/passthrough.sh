#!/usr/bin/env bash
# The pass-through route against a bare hop, and the MCP endpoint beside it: the demo server,
# `switchyard bare-hop` in front of it, and a gateway serving both its MCP endpoint and
# `/servers/demo/mcp`, loaded in turns by one `switchyard bench` run. Given a second binary
# (an older build), a gateway of it is loaded in the same run too, so the two are compared
# under the same conditions.
#
#   benches/passthrough.sh [NEW_BIN [OLD_BIN]]   (default: target/release/switchyard)
#   ROUNDS=5 DURATION=6 CONCURRENCY=1 benches/passthrough.sh
#
# Ports 8380–8399 on 127.0.0.1 must be free.
set -euo pipefail
cd "$(dirname "$0")/.."
new="${1:-target/release/switchyard}"
old="${2:-}"
ROUNDS="${ROUNDS:-5}"
# shellcheck source=benches/common.sh
. benches/common.sh
demo_and_hop 8380 8381 "$new"

targets=()
n=0
for binary in "$new" ${old:+"$old"}; do
  name=$([ "$n" = 0 ] && echo new || echo old)
  dir="$work/$name"
  mkdir -p "$dir"
  printf '[server]\nlisten = "127.0.0.1:%s"\npassthrough_listen = "127.0.0.1:%s"\n[admin]\nenabled = false\n[store]\nkind = "memory"\n[oauth]\nstate_dir = "%s"\n[upstreams.demo]\ntransport = "streamable_http"\nurl = "http://127.0.0.1:8380/mcp"\n' \
    $((8390 + n)) $((8395 + n)) "$dir/state" >"$dir/gateway.toml"
  XDG_STATE_HOME="$dir/state" RUST_LOG=warn "$binary" run -c "$dir/gateway.toml" >"$dir/log" 2>&1 &
  pid=$!
  pids+=("$pid")
  wait_for $((8395 + n))
  targets+=("pass-through-$name=http://127.0.0.1:$((8395 + n))/servers/demo/mcp|$pid")
  targets+=("endpoint-$name=http://127.0.0.1:$((8390 + n))/mcp|$pid")
  n=$((n + 1))
done
sleep 2
args=()
for target in "${targets[@]}"; do
  IFS='|' read -r spec pid <<<"$target"
  if [ "${#args[@]}" = 0 ]; then args+=("$spec"); else args+=(--compare "$spec"); fi
  args+=(--pid "${spec%%=*}=$pid")
done
"$new" bench "${args[@]}" --compare hop=http://127.0.0.1:8381/mcp --pid "hop=$hop" \
  --sessions 8 --concurrency "$concurrency" --duration "$duration" --rounds "$rounds" --quiet
