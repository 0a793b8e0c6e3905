# What the load scripts of benches/ share, sourced by them: a work directory removed at exit,
# the processes they start (`pids`, killed at exit), the load's settings from the environment,
# and `wait_for PORT` (until something listens on 127.0.0.1:PORT).
rounds="${ROUNDS:-3}"
duration="${DURATION:-6}"
concurrency="${CONCURRENCY:-32}"
work="$(mktemp -d)"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"' EXIT

wait_for() {
  for _ in $(seq 100); do
    (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "nothing listens on 127.0.0.1:$1" >&2
  return 1
}

# The demo server on 127.0.0.1:$1 and `switchyard bare-hop` in front of it on :$2, started
# with the binary $3; the hop's process id in `hop`.
demo_and_hop() {
  "$3" demo-server --http "127.0.0.1:$1" >"$work/demo.log" 2>&1 &
  pids+=($!)
  wait_for "$1"
  "$3" bare-hop --listen "127.0.0.1:$2" --upstream "http://127.0.0.1:$1/mcp" >"$work/hop.log" 2>&1 &
  hop=$!
  pids+=("$hop")
}
