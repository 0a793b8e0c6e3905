#!/bin/sh
# The zero-downtime upgrade of deploy/systemd/switchyard.service (its ExecReload, given the
# running gateway's PID): starts the binary now installed with `--upgrade`, makes it the
# service's main process, then has the running one hand its listening sockets over (SIGQUIT).
# The old process drains its calls in flight and exits 0. Usable outside systemd too: without
# NOTIFY_SOCKET the main-process step is skipped.
set -eu

old="${1:?usage: upgrade OLD_PID}"
binary="${SWITCHYARD_BINARY:-/usr/local/bin/switchyard}"
config="${SWITCHYARD_CONFIG:-/etc/switchyard/switchyard.toml}"
# [server] upgrade_socket of the configuration (this is its default).
socket="${SWITCHYARD_UPGRADE_SOCKET:-/tmp/switchyard-upgrade.sock}"

"$binary" check -c "$config" >/dev/null
rm -f "$socket"
"$binary" run -c "$config" --upgrade &
new=$!

# The new process is ready to receive once it listens at the socket.
waited=0
until [ -S "$socket" ]; do
    if ! kill -0 "$new" 2>/dev/null || [ "$waited" -ge 100 ]; then
        echo "upgrade: the new process did not wait at $socket" >&2
        kill "$new" 2>/dev/null || true
        exit 1
    fi
    sleep 0.1
    waited=$((waited + 1))
done

if [ -n "${NOTIFY_SOCKET:-}" ]; then
    if ! systemd-notify "MAINPID=$new"; then
        echo "upgrade: systemd did not take $new as the main process; nothing changed" >&2
        kill "$new" 2>/dev/null || true
        exit 1
    fi
fi
kill -QUIT "$old"
echo "upgrade: $old handed its sockets to $new"
