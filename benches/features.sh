#!/usr/bin/env bash
# What each optional feature costs a proxied `tools/call`: one gateway with every feature off
# (the default configuration) and one gateway per feature turned on, all in front of the same
# demo server, loaded in turns by one `switchyard bench` run beside a bare hop. Each row has the
# process's CPU per call, so a feature's cost is its row against `plain`, and `plain` against
# the hop is what the path costs with everything off. The plain gateway's pass-through route
# (`/servers/demo/mcp`, the upstream as it is) is loaded too, against the same hop.
#
#   benches/features.sh [SWITCHYARD_BIN]   (default: target/release/switchyard)
#   ROUNDS=5 DURATION=8 CONCURRENCY=1 benches/features.sh
#
# Rows: plain; quota (every call counted in the process, never refused); audit (a record per
# call, the arguments as digests); cache (`cache = { seconds = 30 }`: after the first call,
# every call a hit); pinning (`pin = true`, the definitions approved); telemetry (one request in
# a hundred traced to an OTLP/HTTP sink this script runs); inlining (`inline_resources`: every
# result scanned for links, none found); unchecked (`validate_arguments = false`: what checking
# the arguments against the tool's schema costs). Ports 8280–8299 on 127.0.0.1 must be free.
set -euo pipefail
cd "$(dirname "$0")/.."
B="${1:-target/release/switchyard}"
# shellcheck source=benches/common.sh
. benches/common.sh
demo_and_hop 8280 8281 "$B"
# The OTLP/HTTP sink of the telemetry row: every export accepted and dropped.
python3 - 8282 >"$work/sink.log" 2>&1 <<'EOF' &
import http.server, sys
class Sink(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200)
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Sink).serve_forever()
EOF
pids+=($!)

# name|what the feature adds to the configuration (sections before [upstreams.demo])|upstream keys
features=(
  "plain||"
  "quota|[[quota]]\nname = \"bench\"\nrate = \"1000000/second\"\nconcurrent = 100000|"
  "audit|[audit]\nfile = \"$work/audit.log\"|"
  "cache||cache = { seconds = 30 }"
  "pinning||pin = true"
  "telemetry|[telemetry]\notlp_endpoint = \"http://127.0.0.1:8282\"\nsampling_ratio = 0.01\nservice_name = \"switchyard-bench\"|"
  "inlining||inline_resources = true"
  "unchecked||validate_arguments = false"
)
port=8283
main=""
compare=()
watch=()
for spec in "${features[@]}"; do
  IFS='|' read -r name sections keys <<<"$spec"
  dir="$work/$name"
  mkdir -p "$dir"
  pass=""
  [ "$name" = plain ] && pass='passthrough_listen = "127.0.0.1:8299"'
  printf '[server]\nlisten = "127.0.0.1:%s"\n%s\n[admin]\nenabled = false\n[store]\nkind = "memory"\n[oauth]\nstate_dir = "%s"\n%b\n[upstreams.demo]\ntransport = "streamable_http"\nurl = "http://127.0.0.1:8280/mcp"\n%b\n' \
    "$port" "$pass" "$dir/state" "$sections" "$keys" >"$dir/gateway.toml"
  "$B" check -c "$dir/gateway.toml" >/dev/null
  XDG_STATE_HOME="$dir/state" RUST_LOG=warn "$B" run -c "$dir/gateway.toml" >"$dir/log" 2>&1 &
  pid=$!
  pids+=("$pid")
  wait_for "$port"
  if [ -z "$main" ]; then
    main="$name=http://127.0.0.1:$port/mcp"
    watch+=(--pid "$pid" --pid "pass-through=$pid")
    compare+=(--compare "pass-through=http://127.0.0.1:8299/servers/demo/mcp")
  else
    compare+=(--compare "$name=http://127.0.0.1:$port/mcp")
    watch+=(--pid "$name=$pid")
  fi
  port=$((port + 1))
done
sleep 2
"$B" bench "$main" "${compare[@]}" --compare hop=http://127.0.0.1:8281/mcp \
  --sessions 8 --concurrency "$concurrency" --duration "$duration" --rounds "$rounds" \
  --quiet "${watch[@]}" --pid "hop=$hop"
