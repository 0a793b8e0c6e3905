//! How much does Switchyard add to one `tools/call`?
//!
//! In one process and one run: an upstream (the demo server over streamable HTTP on loopback),
//! an rmcp client calling it directly, and the same client calling it through the gateway, in a
//! session and statelessly (2026-07-28). The gateway's cost is the difference; quote the ratio.
//! (Sequential calls from a typed client: for load and concurrency, `switchyard bench`; for
//! the parts of the hot path, `cargo bench --bench micro`.)
//!
//! Run with `cargo bench --bench hot_path`.

use std::{path::Path, sync::Arc};

use criterion::{Criterion, criterion_group, criterion_main};
use rmcp::{
    RoleClient, ServiceExt,
    model::{
        CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, ProtocolVersion,
    },
    service::{ClientLifecycleMode, ClientServiceExt, RunningService},
    transport::{
        StreamableHttpClientTransport, StreamableHttpServerConfig, StreamableHttpService,
        streamable_http_server::session::local::LocalSessionManager,
    },
};
use serde_json::json;
use switchyard::{Gateway, config, demo::DemoServer};
use tokio::runtime::Runtime;
use tokio_util::sync::CancellationToken;

type Client = RunningService<RoleClient, ClientConfig>;

fn client_info() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("bench", "0"),
    )
}

async fn serve_demo() -> String {
    let service = StreamableHttpService::new(
        || Ok(DemoServer::new()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let app = axum::Router::new().nest_service("/mcp", service);
    // Like production servers (Node, uvicorn, Go), the upstream disables Nagle's algorithm;
    // axum does not by default, and a keep-alive client then waits ~40 ms for each SSE reply.
    let listener = axum::serve::ListenerExt::tap_io(listener, |s| {
        let _ = s.set_nodelay(true);
    });
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

async fn serve_gateway(upstream: &str) -> String {
    let text = format!("[upstreams.demo]\nurl = {upstream:?}\n");
    let config = config::parse_str(Path::new("bench.toml"), &text, &config::ProcessVars).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let gateway = Gateway::start(config);
    gateway.wait_settled().await;
    let stop = CancellationToken::new();
    tokio::spawn(switchyard::front::serve(listener, gateway, async move {
        stop.cancelled().await
    }));
    url
}

async fn session_client(url: &str) -> Client {
    client_info()
        .serve(StreamableHttpClientTransport::from_uri(url.to_owned()))
        .await
        .unwrap()
}

async fn stateless_client(url: &str) -> Client {
    client_info()
        .serve_with_lifecycle(
            StreamableHttpClientTransport::from_uri(url.to_owned()),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .unwrap()
}

fn echo(name: &str) -> CallToolRequestParams {
    let serde_json::Value::Object(arguments) = json!({"text": "hello from the bench"}) else {
        unreachable!()
    };
    CallToolRequestParams::new(name.to_owned()).with_arguments(arguments)
}

fn proxied_call(c: &mut Criterion) {
    let runtime = Runtime::new().unwrap();
    let (direct, through, direct_modern, through_modern) = runtime.block_on(async {
        let upstream = serve_demo().await;
        let gateway = serve_gateway(&upstream).await;
        (
            session_client(&upstream).await,
            session_client(&gateway).await,
            stateless_client(&upstream).await,
            stateless_client(&gateway).await,
        )
    });
    let mut group = c.benchmark_group("tools_call_echo");
    let cases = [
        ("session/direct", &direct, "echo"),
        ("session/gateway", &through, "demo__echo"),
        ("stateless/direct", &direct_modern, "echo"),
        ("stateless/gateway", &through_modern, "demo__echo"),
    ];
    for (id, client, tool) in cases {
        group.bench_function(id, |b| {
            b.to_async(&runtime)
                .iter(|| async { client.call_tool(echo(tool)).await.unwrap() })
        });
    }
    group.finish();
}

criterion_group!(benches, proxied_call);
criterion_main!(benches);
