# Switchyard's container image: the gateway built with `--profile dist` and guided by a profile
# of its own request path (deploy/pgo.sh) on Debian bookworm, run as an unprivileged user from
# bookworm-slim. See deploy/README.md for how to build, run and configure it (the
# configuration is /etc/switchyard/switchyard.toml, secrets come from the environment or from
# mounted files).
#
#   docker build -t switchyard .        (or: podman build / buildah bud)

ARG RUST_VERSION=1.95
ARG DEBIAN_RELEASE=bookworm

# --- dependencies ----------------------------------------------------------------------------
# The manifests and the lock file, with empty sources for the workspace's own crates: this
# layer is deploy/pgo.sh's instrumented build of them, which compiles every dependency (and
# adds rustup's llvm-tools), and is reused until Cargo.toml, Cargo.lock or the script change.
# The build guided by the profile compiles them again below: it needs the profile, which
# needs the sources.
FROM docker.io/library/rust:${RUST_VERSION}-slim-${DEBIAN_RELEASE} AS builder
# No cmake: any build script that tried to run it should fail loudly.
ENV CMAKE=/nonexistent \
    CARGO_TERM_COLOR=never \
    CARGO_INCREMENTAL=0
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY crates/bench/Cargo.toml crates/bench/
COPY crates/conformance/Cargo.toml crates/conformance/
COPY crates/embed/Cargo.toml crates/embed/
COPY deploy/pgo.sh deploy/pgo.sh
RUN mkdir -p src benches/micro crates/bench/src crates/conformance/src crates/embed/src \
    && echo 'fn main() {}' > src/main.rs \
    && touch src/lib.rs crates/bench/src/lib.rs crates/conformance/src/lib.rs \
        crates/embed/src/lib.rs \
    && echo 'fn main() {}' > crates/conformance/src/main.rs \
    && echo 'fn main() {}' > benches/hot_path.rs \
    && echo 'fn main() {}' > benches/micro/main.rs \
    && deploy/pgo.sh dist instrumented

# --- the gateway -----------------------------------------------------------------------------
# The real sources over the empty ones; touched, so that cargo rebuilds the workspace's crates
# whatever times the build context gave them. deploy/pgo.sh builds the gateway instrumented,
# runs a few seconds of load through it on the container's loopback (the demo server as its
# upstream, `switchyard bench` as its clients), and builds it again guided by what it counted.
COPY src src
COPY crates/bench/src crates/bench/src
COPY crates/embed/src crates/embed/src
RUN find src crates/bench/src crates/embed/src -name '*.rs' -exec touch {} + \
    && built="$(deploy/pgo.sh dist)" \
    && cp "$built" /usr/local/bin/switchyard \
    && /usr/local/bin/switchyard --version

# --- runtime ---------------------------------------------------------------------------------
FROM docker.io/library/debian:${DEBIAN_RELEASE}-slim AS runtime
# CA certificates for HTTPS upstreams and authorization servers (the TLS stack reads the
# system's roots); nothing else: the health check below needs only bash.
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 switchyard \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/switchyard \
        --shell /usr/sbin/nologin switchyard \
    && mkdir -p /etc/switchyard /var/lib/switchyard \
    && chown 10001:10001 /var/lib/switchyard \
    && chmod 0700 /var/lib/switchyard
COPY --from=builder /usr/local/bin/switchyard /usr/local/bin/switchyard
# The default configuration: the built-in demo server as a stdio upstream (node/npx and uvx
# are not in this image). Mount your own file over it.
COPY deploy/switchyard.toml /etc/switchyard/switchyard.toml
# The state directory ($XDG_STATE_HOME/switchyard): the admin token, the sessions' store file
# and its key, OAuth tokens. Keep it on a volume so that sessions outlive the container.
ENV XDG_STATE_HOME=/var/lib \
    HOME=/var/lib/switchyard
VOLUME ["/var/lib/switchyard"]
# The MCP endpoint (/mcp, /healthz) and the admin listener (API, status page, /metrics), as
# deploy/switchyard.toml sets them.
EXPOSE 8080 9090
USER 10001:10001
WORKDIR /var/lib/switchyard
# /healthz answers any Host and is 200 while the gateway serves (`status` says whether some
# upstream is degraded); the port is the one of [server] listen in the default configuration.
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
    CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/8080 && printf 'GET /healthz HTTP/1.0\\r\\nHost: 127.0.0.1\\r\\n\\r\\n' >&3 && head -n 1 <&3 | grep -q ' 200 '"]
# SIGTERM (the default stop signal) drains: calls in flight get [server]
# shutdown_grace_seconds, upstream sessions 5 s more. Give `docker stop -t` at least that.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/switchyard"]
CMD ["run", "-c", "/etc/switchyard/switchyard.toml"]
