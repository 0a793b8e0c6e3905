#!/usr/bin/env bash
# What each build profile costs and gives: a clean `cargo build` of the gateway per profile
# (timed, without cmake), then every build's gateway and pass-through route loaded in one
# `switchyard bench` run beside the direct fixture and a bare hop.
#
#   benches/profiles.sh [WORKDIR]        (default /tmp/switchyard-profiles; needs ~6 GB)
#   BUILD=0 benches/profiles.sh          (the load test alone, on the builds already there)
#   ONLY="thin release" benches/profiles.sh  (build only these; the others must be there)
#
# The profiles are set by cargo's environment overrides, so the manifest is not edited:
#   dist     lto = "fat",  codegen-units = 1    (`--profile dist`)
#   thin     lto = "thin", codegen-units = 16
#   release  lto = false,  codegen-units = 16   (`--release`: cargo's own defaults)
# Ports 8180–8185, 9101 and 9102 on 127.0.0.1 must be free.
set -euo pipefail
cd "$(dirname "$0")/.."
work="${1:-/tmp/switchyard-profiles}"
mkdir -p "$work"
export CARGO_TERM_COLOR=never CARGO_INCREMENTAL=0
# A build that ran cmake would fail here.
export CMAKE=/nonexistent

profiles=(dist:fat:1 thin:thin:16 release:false:16)
for spec in "${profiles[@]}"; do
  [ "${BUILD:-1}" = 0 ] && break
  IFS=: read -r name lto units <<<"$spec"
  if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then continue; fi
  rm -rf "$work/$name"
  start=$(date +%s)
  CARGO_TARGET_DIR="$work/$name" CARGO_PROFILE_RELEASE_LTO="$lto" \
    CARGO_PROFILE_RELEASE_CODEGEN_UNITS="$units" \
    cargo build --release --quiet --bin switchyard
  seconds=$(($(date +%s) - start))
  size=$(stat -c %s "$work/$name/release/switchyard")
  echo "build $name (lto=$lto, codegen-units=$units): ${seconds}s, binary $((size / 1048576)) MiB" |
    tee -a "$work/builds.txt"
done

B="$work/dist/release/switchyard"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
$B demo-server --http 127.0.0.1:9101 >"$work/demo.log" 2>&1 &
demo=$!
pids+=("$demo")
$B bare-hop --listen 127.0.0.1:9102 --upstream http://127.0.0.1:9101/mcp >"$work/hop.log" 2>&1 &
hop=$!
pids+=("$hop")

targets=()
watch=()
port=8180
for spec in "${profiles[@]}"; do
  IFS=: read -r name _ _ <<<"$spec"
  dir="$work/$name/run"
  mkdir -p "$dir"
  cat >"$dir/gateway.toml" <<EOF
[server]
listen = "127.0.0.1:$port"
passthrough_listen = "127.0.0.1:$((port + 1))"
upgrade_socket = "$dir/upgrade.sock"

[admin]
enabled = false

[upstreams.demo]
transport = "streamable_http"
url = "http://127.0.0.1:9101/mcp"
EOF
  "$work/$name/release/switchyard" -c "$dir/gateway.toml" >"$dir/gateway.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  targets+=("$name=http://127.0.0.1:$port/mcp" "$name-pass=http://127.0.0.1:$((port + 1))/servers/demo/mcp")
  if [ ${#watch[@]} = 0 ]; then watch+=(--pid "$pid"); else watch+=(--pid "$name=$pid"); fi
  watch+=(--pid "$name-pass=$pid")
  port=$((port + 2))
done
sleep 3

first="${targets[0]}"
compare=()
for target in "${targets[@]:1}" direct=http://127.0.0.1:9101/mcp hop=http://127.0.0.1:9102/mcp; do
  compare+=(--compare "$target")
done
$B bench "$first" "${compare[@]}" --sessions 8 --concurrency 32 --duration 6 --rounds 3 \
  "${watch[@]}" --pid direct="$demo" --pid hop="$hop" --quiet | tee "$work/bench.txt"
cat "$work/builds.txt"
