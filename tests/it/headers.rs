//! Header rules towards an upstream, seen by the upstream itself (the notes server's `header`
//! tool reads what it received): nothing of the client's passes unless forwarded, its
//! credentials never do, configured values come from secret files, and headers naming the
//! user carry each user's own name on a shared upstream.

use std::collections::HashMap;

use http::{HeaderName, HeaderValue};
use rmcp::{
    ServiceExt,
    model::CallToolRequestParams,
    transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use serde_json::json;

use crate::{
    fixtures::notes::NotesServer,
    harness::{GatewayBuilder, api_key, api_keys_section, text},
};

/// A client of `url` for `user` that sends `headers` with every request.
pub async fn client_sending(
    url: &str,
    user: &str,
    headers: &[(&'static str, &str)],
) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    let custom: HashMap<HeaderName, HeaderValue> = headers
        .iter()
        .map(|(name, value)| {
            (
                HeaderName::from_static(name),
                HeaderValue::from_str(value).unwrap(),
            )
        })
        .collect();
    let config = StreamableHttpClientTransportConfig::with_uri(url.to_owned())
        .auth_header(api_key(user))
        .custom_headers(custom);
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("the client connects")
}

async fn upstream_saw(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    header: &str,
) -> String {
    let result = client
        .call_tool(
            CallToolRequestParams::new("notes__header")
                .with_arguments(json!({"name": header}).as_object().unwrap().clone()),
        )
        .await
        .expect("the header tool answers");
    text(&result).to_owned()
}

/// What alice's client sends besides its credential.
pub const SENT: [(&str, &str); 4] = [
    ("x-tenant", "acme"),
    ("x-client-trace", "trace-1"),
    ("x-other", "not for upstreams"),
    ("cookie", "session=client"),
];

/// What the upstream sees of alice's requests sending `SENT`, under the rules these tests
/// configure (`X-Upstream-Key` set to `key`, `X-User` naming the user, `X-Tenant` forwarded,
/// `X-Client-Trace` renamed `X-Trace`).
pub fn seen_by_upstream(key: &'static str) -> [(&'static str, &'static str); 8] {
    [
        ("x-tenant", "acme"),
        ("x-trace", "trace-1"),
        ("x-client-trace", "(absent)"),
        ("x-other", "(absent)"),
        ("cookie", "(absent)"),
        ("authorization", "(absent)"),
        ("x-upstream-key", key),
        ("x-user", "user:alice"),
    ]
}

#[tokio::test]
async fn upstreams_get_what_the_rules_say_and_nothing_else() {
    let notes = NotesServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("upstream-key");
    std::fs::write(&secret, "from-a-file\n").unwrap();
    let gw = GatewayBuilder::new()
        .section(&api_keys_section(&["alice", "bob"]))
        .http_with(
            "notes",
            &notes.url(),
            &format!(
                "session = \"shared\"\n\
                 headers = {{ X-Upstream-Key = \"${{file:{}}}\", X-User = \"user:${{claim:sub}}\" }}\n\
                 forward_headers = [\"X-Tenant\"]\n\
                 rename_headers = {{ X-Client-Trace = \"X-Trace\" }}\n",
                secret.display()
            ),
        )
        .start()
        .await;
    let alice = client_sending(&gw.url(), "alice", &SENT).await;
    let bob = client_sending(&gw.url(), "bob", &[]).await;
    for (header, expected) in seen_by_upstream("from-a-file") {
        assert_eq!(upstream_saw(&alice, header).await, expected, "{header}");
    }
    // One shared upstream, yet each user's requests carry their own name.
    assert_eq!(upstream_saw(&bob, "x-user").await, "user:bob");
    assert_eq!(upstream_saw(&bob, "x-tenant").await, "(absent)");
    assert_eq!(upstream_saw(&alice, "x-user").await, "user:alice");
}

#[test]
fn credentials_and_transport_headers_cannot_be_forwarded() {
    let text = r#"
        [upstreams.a]
        url = "http://127.0.0.1:1/mcp"
        headers = { X-Set = "1" }
        forward_headers = ["Authorization", "mcp-session-id", "X-Set", "bad header"]
        rename_headers = { Cookie = "X-Cookie", X-Ok = "Host" }
        [upstreams.b]
        command = "true"
        forward_headers = ["X-Tenant"]
    "#;
    let error = switchyard::config::parse_str(
        std::path::Path::new("s.toml"),
        text,
        &switchyard::config::ProcessVars,
    )
    .unwrap_err()
    .to_string();
    for expected in [
        "upstreams.a.forward_headers[0]: `Authorization` carries the client's credentials",
        "upstreams.a.forward_headers[1]: is set by the MCP transport",
        "upstreams.a.forward_headers[2]: `X-Set` is already set by `headers`",
        "upstreams.a.forward_headers[3]: `bad header` is not a valid HTTP header name",
        "upstreams.a.rename_headers.Cookie: `Cookie` carries the client's credentials",
        "upstreams.a.rename_headers.X-Ok: is set by the MCP transport",
        "upstreams.b.forward_headers: does not apply to transport `stdio`",
    ] {
        assert!(error.contains(expected), "{expected}\nnot in\n{error}");
    }
}

/// A tool whose schema asks for an `Mcp-Param-*` header (SEP-2243) gets it from the gateway,
/// written from the call's arguments: for a session client, which sends none, and for a
/// 2026-07-28 one; plain, or in the Base64 form where the text could not travel as it is. A
/// line break in an argument cannot add a header. The upstream, rmcp's server, refuses a call
/// whose header is missing or differs from the body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn annotated_arguments_reach_a_2026_07_28_upstream_as_their_headers() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(switchyard_conformance::serve(listener));
    let gw = GatewayBuilder::new()
        .section("[catalog]\nprefix_mode = \"always\"")
        .http("fixture", &url)
        .start()
        .await;
    let modern = gw.modern_client().await;
    // rmcp's client sends the headers of the tools it has listed.
    modern.list_all_tools().await.unwrap();
    let clients = [
        ("a session client", gw.client().await),
        ("a 2026-07-28 client", modern),
    ];
    for region in ["eu-west-1", "Zürich", " padded ", "eu\r\nX-Injected: 1"] {
        for (who, client) in &clients {
            let arguments = json!({ "region": region });
            let result = crate::harness::call(client, "fixture__test_x_mcp_header", arguments)
                .await
                .unwrap_or_else(|error| panic!("{region:?} from {who}: {error}"));
            assert_eq!(text(&result), format!("Region: {region}"));
        }
    }
}
