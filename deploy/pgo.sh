#!/usr/bin/env bash
# The profile-guided build of the gateway, the binary the image ships: the gateway is built
# instrumented, runs a short load of the requests it exists for, and is built again with what
# that run counted, so that the compiler lays out, inlines and predicts the request path as it
# is taken. On the 2-core VM of benches/README.md it spends about a quarter fewer instructions
# per proxied call than the same profile built plainly ("The profile-guided build").
#
#   deploy/pgo.sh [PROFILE]                (default: dist; prints the path of the binary built)
#   deploy/pgo.sh PROFILE instrumented     (the instrumented build only: the image's layer of
#                                           dependencies, built before the sources are there)
#
# Needs what `cargo build` needs, and llvm-profdata of the toolchain's own LLVM (rustup's
# `llvm-tools` component, added here when rustup is there). Both builds go to target
# directories of their own ($CARGO_TARGET_DIR/pgo/generate and …/pgo/use, or under target/),
# so that neither rebuilds the plain one's nor each other's; the profile is kept beside them
# (pgo/switchyard.profdata). The load runs on 127.0.0.1, on ports the system picks, and stops
# with the script.
set -euo pipefail
cd "$(dirname "$0")/.."
profile="${1:-dist}"
step="${2:-all}"
case "$step" in
  all | instrumented) ;;
  *)
    echo "deploy/pgo.sh: the second argument may only be \"instrumented\" (got \"$step\")" >&2
    exit 2
    ;;
esac
target="${CARGO_TARGET_DIR:-$PWD/target}"
pgo="$target/pgo"
raw="$pgo/raw"
merged="$pgo/switchyard.profdata"
flags="${RUSTFLAGS:-}"

host="$(rustc -vV | sed -n 's/^host: //p')"
profdata="$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata"
if [ ! -x "$profdata" ] && command -v rustup >/dev/null; then
  rustup component add llvm-tools >&2
fi
if [ ! -x "$profdata" ]; then
  echo "llvm-profdata of this toolchain is missing ($profdata): rustup component add llvm-tools" >&2
  exit 1
fi

echo "== the instrumented build ($profile)" >&2
RUSTFLAGS="$flags -Cprofile-generate=$raw" CARGO_TARGET_DIR="$pgo/generate" \
  cargo build --locked --profile "$profile" --bin switchyard >&2
instrumented="$pgo/generate/$profile/switchyard"
if [ "$step" = instrumented ]; then
  echo "$instrumented"
  exit 0
fi

echo "== the training load" >&2
rm -rf "$raw"
work="$(mktemp -d)"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"' EXIT
# Only the gateway's counts are kept: the demo server and the load tool are the same binary,
# and their code is not what the profile is for.
scratch() { LLVM_PROFILE_FILE="$work/other-%p.profraw" "$instrumented" "$@"; }
# The URL a process prints once it listens (matching `$2`), from its log `$1`.
url_in() {
  local found
  for _ in $(seq 300); do
    found="$(grep -o "$2" "$1" | head -n 1 | grep -o 'http://[^ ]*/mcp')" || true
    if [ -n "$found" ]; then
      echo "$found"
      return 0
    fi
    sleep 0.1
  done
  echo "no URL in $1:" >&2
  cat "$1" >&2
  return 1
}
scratch demo-server --http 127.0.0.1:0 >"$work/demo.log" 2>&1 &
pids+=($!)
upstream="$(url_in "$work/demo.log" 'listening on http://[^ ]*/mcp')"
printf '[server]\nlisten = "127.0.0.1:0"\n[admin]\nenabled = false\n[upstreams.demo]\ntransport = "streamable_http"\nurl = "%s"\n' \
  "$upstream" >"$work/gateway.toml"
XDG_STATE_HOME="$work/state" RUST_LOG=warn LLVM_PROFILE_FILE="$raw/gateway-%p.profraw" \
  "$instrumented" run -c "$work/gateway.toml" >"$work/gateway.log" 2>&1 &
gateway=$!
pids+=("$gateway")
url="$(url_in "$work/gateway.log" 'serves MCP at http://[^ ]*/mcp')"
# Until the gateway lists the demo server's tools.
for _ in $(seq 100); do
  scratch bench "$url" --sessions 1 --concurrency 1 --requests 5 --warmup 0 --rounds 1 \
    --quiet >/dev/null 2>&1 && break
  sleep 0.2
done
# Calls in sessions (2025-11-25), many and one at a time; stateless calls, lists and reads
# (2026-07-28); calls of 64 KiB. Every answer is checked: a failure stops the build.
load() {
  if ! scratch bench "$url" --warmup 0 --rounds 1 --quiet "$@" >"$work/load.log" 2>&1; then
    cat "$work/load.log" >&2
    echo "the training load failed (switchyard bench $*)" >&2
    return 1
  fi
}
load --sessions 8 --concurrency 32 --duration 4
load --sessions 8 --concurrency 1 --duration 2
load --era stateless --mix call=8,list=1,read=1 --concurrency 16 --duration 3
load --sessions 4 --concurrency 8 --duration 2 --payload-bytes 65536
# The counts are written as the gateway exits; it drains its sessions first.
kill -TERM "$gateway"
for _ in $(seq 300); do
  kill -0 "$gateway" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$gateway" 2>/dev/null; then
  echo "the instrumented gateway did not stop within 30 s of SIGTERM" >&2
  exit 1
fi
wait "$gateway" || true
if ! compgen -G "$raw/gateway-*.profraw" >/dev/null; then
  echo "the instrumented gateway wrote no profile into $raw" >&2
  cat "$work/gateway.log" >&2
  exit 1
fi
"$profdata" merge -o "$merged" "$raw"/gateway-*.profraw
echo "== the profile-guided build ($profile, $(du -h "$merged" | cut -f1) of counts)" >&2
RUSTFLAGS="$flags -Cprofile-use=$merged -Cllvm-args=-pgo-warn-missing-function=false" \
  CARGO_TARGET_DIR="$pgo/use" cargo build --locked --profile "$profile" --bin switchyard >&2
echo "$pgo/use/$profile/switchyard"
