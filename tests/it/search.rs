//! Tool search: a catalog of 2,000 tools from 40 upstreams served as two tools, with which an
//! SDK client finds a tool it was not listed and calls it, directly and through `call_tool`,
//! and sees its session's own list grow; policy hides a tool from search as from lists. And
//! the quality of the ranking, measured on real servers' recorded tools with 111
//! natural-language queries (`search-queries.json`), kept from dropping.

use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

use crate::{
    fixtures::scripted::Scripted,
    harness::{GatewayBuilder, Recorder, api_key, api_keys_section, text},
};

const VERBS: [&str; 10] = [
    "get", "list", "update", "delete", "archive", "sync", "export", "import", "count", "watch",
];
const NOUNS: [&str; 10] = [
    "user", "project", "ticket", "order", "report", "metric", "alert", "device", "contract",
    "shipment",
];

/// Fifty tools of upstream `n`; upstream 17 has the invoice tool among them.
fn generated(n: usize) -> Vec<Value> {
    let mut tools: Vec<Value> = (0..50)
        .map(|i| {
            let (verb, noun) = (VERBS[i % 10], NOUNS[(i / 10 + n) % 10]);
            json!({
                "name": format!("{verb}_{noun}_{i}"),
                "description": format!("{verb} {noun} records of system {n}"),
                "inputSchema": {"type": "object", "properties": {
                    "id": {"type": "string", "description": format!("The {noun}'s id")}
                }}
            })
        })
        .collect();
    if n == 17 {
        tools[49] = json!({
            "name": "create_invoice",
            "description": "Create a new invoice for a customer with line items and a due date",
            "inputSchema": {"type": "object", "properties": {
                "customer": {"type": "string"}, "amount": {"type": "number"}
            }, "required": ["customer"]}
        });
    }
    tools
}

fn call(name: &str, arguments: Value) -> CallToolRequestParams {
    let Value::Object(arguments) = arguments else {
        unreachable!()
    };
    CallToolRequestParams::new(name.to_owned()).with_arguments(arguments)
}

fn names(found: &rmcp::model::CallToolResult) -> Vec<String> {
    let structured = found
        .structured_content
        .as_ref()
        .expect("structured results");
    structured["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_finds_and_calls_one_tool_among_two_thousand() {
    let servers =
        futures::future::join_all((0..40).map(|n| Scripted::start(json!({"tools": generated(n)}))))
            .await;
    let mut builder = GatewayBuilder::new()
        .section("[catalog]\ntool_search = \"auto\"")
        .section(&api_keys_section(&["alice", "bob"]))
        .section(
            "[[policy]]\nwho.principals = [\"user:key:bob\"]\ndeny.tools = [\"u17:create_invoice\"]",
        );
    for (n, server) in servers.iter().enumerate() {
        builder = builder.http_with(&format!("u{n:02}"), &server.url(), "session = \"shared\"");
    }
    let gw = builder.start().await;
    assert_eq!(gw.gateway.live().catalog.tools().len(), 2000);
    // The snapshot's search index is built when it is published, before any search.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !gw.gateway.live().catalog.search_prepared() {
        assert!(tokio::time::Instant::now() < deadline, "no index built");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let alice = Recorder::plain("alice");
    let client = alice.clone().connect_as(&gw.url(), &api_key("alice")).await;
    let listed: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|tool| tool.name.to_string())
        .collect();
    assert_eq!(listed, ["search_tools", "call_tool"]);

    let found = client
        .call_tool(call(
            "search_tools",
            json!({"query": "make an invoice for a customer"}),
        ))
        .await
        .unwrap();
    // The text has a line per tool, enough to call it; the structured result, definitions.
    let first_line = text(&found).lines().next().unwrap_or_default().to_owned();
    assert_eq!(
        first_line,
        "u17__create_invoice(customer: string, amount?: number) — Create a new invoice for a \
         customer with line items and a due date"
    );
    let found = names(&found);
    assert_eq!(found[0], "u17__create_invoice", "{found:?}");
    assert!(found.len() <= 5);

    // Her session's own list now holds what she found, and she was told.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while alice.seen().tools_changed == 0 {
        assert!(tokio::time::Instant::now() < deadline, "no list_changed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let listed: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|tool| tool.name.to_string())
        .collect();
    assert!(
        listed.contains(&"u17__create_invoice".to_owned()),
        "{listed:?}"
    );
    assert_eq!(listed.len(), 2 + found.len());

    let direct = client
        .call_tool(call(
            "u17__create_invoice",
            json!({"customer": "acme", "amount": 12}),
        ))
        .await
        .unwrap();
    assert!(text(&direct).starts_with("create_invoice"), "{direct:?}");
    let through = client
        .call_tool(call(
            "call_tool",
            json!({"name": "u17__create_invoice", "arguments": {"customer": "globex"}}),
        ))
        .await
        .unwrap();
    assert!(text(&through).contains("globex"), "{through:?}");
    assert_eq!(servers[17].calls("create_invoice").len(), 2);
    // A name slightly wrong is refused with the closest names she may call.
    let misspelled = client
        .call_tool(call(
            "call_tool",
            json!({"name": "u17__create_invoices", "arguments": {"customer": "initech"}}),
        ))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        misspelled
            .contains("unknown tool `u17__create_invoices`; the closest: `u17__create_invoice`"),
        "{misspelled}"
    );

    // Bob's policy hides the tool: search does not show it, and he cannot call it.
    let bob = Recorder::plain("bob")
        .connect_as(&gw.url(), &api_key("bob"))
        .await;
    let his = bob
        .call_tool(call(
            "search_tools",
            json!({"query": "make an invoice for a customer", "limit": 20}),
        ))
        .await
        .unwrap();
    assert!(!names(&his).iter().any(|name| name.contains("invoice")));
    let refused = bob
        .call_tool(call(
            "call_tool",
            json!({"name": "u17__create_invoice", "arguments": {"customer": "x"}}),
        ))
        .await;
    let refused = refused.unwrap_err().to_string();
    // Refused as unknown, with the closest names among those he sees: not the hidden one.
    let (_, closest) = refused.split_once("the closest:").expect(&refused);
    let (closest, _data) = closest.split_once('(').expect(&refused);
    assert!(
        closest.contains("u17__") && !closest.contains("invoice"),
        "{refused}"
    );
    assert_eq!(servers[17].calls("create_invoice").len(), 2);

    // A bad search is a clear error.
    let bad = client
        .call_tool(call("search_tools", json!({"query": ""})))
        .await
        .unwrap_err();
    assert!(bad.to_string().contains("query"), "{bad}");
}

/// Tools a person asks for without their words, and a query for each that shares no word with
/// the tool's text.
fn everyday() -> (Vec<Value>, [(&'static str, &'static str); 3]) {
    let url = json!({"type": "object", "properties": {
        "url": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}
    }, "required": ["url"]});
    let money = json!({"type": "object", "properties": {
        "amount": {"type": "number"}, "from": {"type": "string"}, "to": {"type": "string"}
    }});
    let city = json!({"type": "object", "properties": {"city": {"type": "string"}}});
    let tools = vec![
        json!({"name": "add_bookmark", "inputSchema": url,
               "description": "Save a URL to the reading list, with optional tags"}),
        json!({"name": "convert_currency", "inputSchema": money,
               "description": "Convert an amount of money from one currency to another at \
                               today's exchange rate"}),
        json!({"name": "get_forecast", "inputSchema": city,
               "description": "Weather forecast for a city for the next seven days"}),
    ];
    let queries = [
        (
            "stash this article so I can revisit it on the weekend",
            "daily__add_bookmark",
        ),
        ("what are 20 euros worth in yen", "daily__convert_currency"),
        ("will Paris be drizzly tomorrow", "daily__get_forecast"),
    ];
    (tools, queries)
}

/// With `search_model` (a sentence encoder), search finds tools by what they mean: queries that
/// share no word with their tool find it among 203 tools, as words alone cannot; a policy's
/// hidden tool stays hidden from search by meaning too; a huge query costs what its start does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_by_meaning_finds_tools_that_share_no_word_with_the_query() {
    let (tools, queries) = everyday();
    let daily = Scripted::start(json!({ "tools": tools })).await;
    let others =
        futures::future::join_all((0..4).map(|n| Scripted::start(json!({"tools": generated(n)}))))
            .await;
    let model = crate::deps::search_model().to_str().unwrap().to_owned();
    let mut builder = GatewayBuilder::new()
        .section(&format!(
            "[catalog]\ntool_search = \"on\"\nsearch_model = {model:?}"
        ))
        .section(&api_keys_section(&["alice", "bob"]))
        .section(
            "[[policy]]\nwho.principals = [\"user:key:bob\"]\ndeny.tools = [\"daily:add_bookmark\"]",
        )
        .http_with("daily", &daily.url(), "session = \"shared\"");
    for (n, server) in others.iter().enumerate() {
        builder = builder.http_with(&format!("u{n:02}"), &server.url(), "session = \"shared\"");
    }
    let gw = builder.start().await;
    assert_eq!(gw.gateway.live().catalog.tools().len(), 203);
    // The published snapshot's vectors are made beside the requests.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !gw.gateway.live().catalog.meanings_ready() {
        assert!(tokio::time::Instant::now() < deadline, "no vectors made");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // They are kept in the state directory, for the next start: the owner's alone, one
    // record (key, scale and 384 numbers of a byte) per tool.
    let state_dir = gw.gateway.live().config.oauth.state_dir.clone();
    const RECORD: usize = 8 + 4 + 384;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let kept = loop {
        let kept = std::fs::read_dir(&state_dir).ok().and_then(|entries| {
            entries
                .map(|entry| entry.unwrap().path())
                .find(|path| path.to_string_lossy().contains("search-vectors-"))
        });
        // The file may first hold the vectors of an earlier snapshot (fewer tools).
        let whole = |path: &std::path::PathBuf| {
            std::fs::metadata(path)
                .is_ok_and(|m| (m.len() as usize).saturating_sub(32) / RECORD >= 203)
        };
        if let Some(kept) = kept.filter(whole) {
            break kept;
        }
        assert!(tokio::time::Instant::now() < deadline, "no vectors kept");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let metadata = std::fs::metadata(&kept).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&metadata.permissions()) & 0o777,
        0o600
    );
    let records = (metadata.len() as usize - 32) / RECORD;
    assert!(records >= 203, "{records} vectors kept");
    let catalog = gw.gateway.live().catalog.clone();
    for (query, tool) in queries {
        let by_words = catalog.search_tools(query, 5, None);
        assert!(
            !by_words.iter().any(|found| &*found.name == tool),
            "`{query}` shares a word with {tool}"
        );
    }

    let alice = Recorder::plain("alice")
        .connect_as(&gw.url(), &api_key("alice"))
        .await;
    for (query, tool) in queries {
        let found = alice
            .call_tool(call("search_tools", json!({"query": query, "limit": 3})))
            .await
            .unwrap();
        assert!(
            names(&found).contains(&tool.to_owned()),
            "{query}: {found:?}"
        );
    }

    // Bob's view is his own: its vectors are made after his first search. Once they are, the
    // tool his policy hides is not found by meaning either.
    let bob = Recorder::plain("bob")
        .connect_as(&gw.url(), &api_key("bob"))
        .await;
    let (rain, forecast) = queries[2];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let found = bob
            .call_tool(call("search_tools", json!({"query": rain, "limit": 3})))
            .await
            .unwrap();
        if names(&found).contains(&forecast.to_owned()) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "bob's view never searched by meaning"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (keep, bookmark) = queries[0];
    let his = bob
        .call_tool(call("search_tools", json!({"query": keep, "limit": 20})))
        .await
        .unwrap();
    assert!(!names(&his).contains(&bookmark.to_owned()), "{his:?}");

    // A query of 200 KB is read for its first words only by the model, and answered; by
    // words, each of its 30,000 distinct words (no tool's) is looked up once.
    let word = |mut n: usize| {
        let mut word = String::from(" qz");
        loop {
            word.push(char::from(b'a' + (n % 26) as u8));
            n /= 26;
            if n == 0 {
                break word;
            }
        }
    };
    let long = format!("{rain} ").repeat(20) + &(0..30_000).map(word).collect::<String>();
    let found = alice
        .call_tool(call("search_tools", json!({"query": long, "limit": 3})))
        .await
        .unwrap();
    assert!(names(&found).contains(&forecast.to_owned()), "{found:?}");
}
