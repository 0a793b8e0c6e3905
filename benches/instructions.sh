#!/usr/bin/env bash
# Instructions per request, counted by callgrind: the MCP endpoint of each binary given and
# `switchyard bare-hop`, each in front of the demo server, under the same `switchyard bench`
# load (tools/call over 8 sessions, 4 workers). Counts of instructions do not depend on what
# else the machine is doing, so two builds compare to within a fraction of a percent where
# timings on a shared machine spread by ten; they do not see cache misses or system calls,
# which `../perf`-style wrk runs still measure.
#
#   benches/instructions.sh [NEW_BIN [OLD_BIN]]   (default: target/release/switchyard)
#   REQUESTS=3000 benches/instructions.sh
#
# Needs valgrind (apt-get install valgrind). About a minute per target. Each process runs
# under callgrind; its counts are zeroed after a warm-up and dumped after the measured
# requests. Requests are counted as hyper's parses of request heads (the load's own
# `initialize`s included). Ports 8360–8379 on 127.0.0.1 must be free.
set -euo pipefail
cd "$(dirname "$0")/.."
new="${1:-target/release/switchyard}"
old="${2:-}"
requests="${REQUESTS:-3000}"
command -v valgrind >/dev/null || {
  echo "valgrind is missing: apt-get install valgrind" >&2
  exit 1
}
# shellcheck source=benches/common.sh
. benches/common.sh
"$new" demo-server --http 127.0.0.1:8360 >"$work/demo.log" 2>&1 &
pids+=($!)
wait_for 8360

# Runs `$2…` (listening on 127.0.0.1:$1) under callgrind, loads it, prints its instructions
# per request as "LABEL INSTRUCTIONS REQUESTS".
count() {
  local label="$1" port="$2"
  shift 2
  valgrind --tool=callgrind --callgrind-out-file="$work/$label.%p" "$@" >"$work/$label.log" 2>&1 &
  local pid=$!
  pids+=("$pid")
  for _ in $(seq 300); do (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
  local url="http://127.0.0.1:$port/mcp"
  # The warm-up, again until it passes: under callgrind, a gateway lists its upstream's
  # tools some seconds after it listens.
  for _ in $(seq 60); do
    "$new" bench "$url" --sessions 8 --concurrency 4 --requests 300 --warmup 0 --rounds 1 \
      --quiet >/dev/null 2>&1 && break
    sleep 1
  done
  callgrind_control -z "$pid" >/dev/null 2>&1
  "$new" bench "$url" --sessions 8 --concurrency 4 --requests "$requests" --warmup 0 \
    --rounds 1 --quiet >/dev/null
  callgrind_control -d "$pid" >/dev/null 2>&1
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  # The dump asked for (`.1`), not the one written at exit.
  local dump="$work/$label.$pid.1"
  callgrind_annotate --inclusive=yes --tree=caller --threshold=100 "$dump" 2>/dev/null |
    awk -v label="$label" '
      /PROGRAM TOTALS/ { gsub(",", "", $1); total = $1 }
      # A block lists the callers of one function, then the function: the calls of the
      # server role'"'"'s parse are the sum over its callers.
      NF == 0 { calls = 0; next }
      / < / && match($0, /\(([0-9,]+)x\)/) {
        n = substr($0, RSTART + 1, RLENGTH - 3); gsub(",", "", n); calls += n; next
      }
      /\* .*role::Server as .*Http1Transaction>::parse \[/ { heads = calls }
      END { printf "%s %d %d\n", label, total / heads, heads }'
}

{
  count hop 8361 "$new" bare-hop --listen 127.0.0.1:8361 --upstream http://127.0.0.1:8360/mcp
  n=0
  for binary in "$new" ${old:+"$old"}; do
    name=$([ "$n" = 0 ] && echo gateway || echo old-gateway)
    port=$((8370 + n))
    mkdir -p "$work/$name"
    printf '[server]\nlisten = "127.0.0.1:%s"\n[admin]\nenabled = false\n[store]\nkind = "memory"\n[oauth]\nstate_dir = "%s"\n[upstreams.demo]\ntransport = "streamable_http"\nurl = "http://127.0.0.1:8360/mcp"\n' \
      "$port" "$work/$name/state" >"$work/$name/gateway.toml"
    XDG_STATE_HOME="$work/$name/state" RUST_LOG=warn \
      count "$name" "$port" "$binary" run -c "$work/$name/gateway.toml"
    n=$((n + 1))
  done
} >"$work/counts"
awk '
  { label[NR] = $1; ir[NR] = $2; heads[NR] = $3; if ($1 == "hop") hop = $2 }
  END {
    print "| target | instructions per request | requests counted | against the hop |"
    print "|---|---|---|---|"
    for (i = 1; i <= NR; i++) printf "| %s | %d | %d | %.2f× |\n", label[i], ir[i], heads[i], ir[i] / hop
  }' "$work/counts"
