//! The merged catalog as clients see it: prefixes, order, pass-through of definitions, and the
//! unprefixed modes.

use crate::{
    fixtures::notes::NotesServer,
    harness::{GatewayBuilder, connect_client, remote_notes, two_upstreams},
};

fn names<T>(items: &[T], name: impl Fn(&T) -> &str) -> Vec<String> {
    items.iter().map(|i| name(i).to_owned()).collect()
}

#[tokio::test]
async fn merged_lists_carry_prefixes_in_config_order() {
    let (_notes, gw) = two_upstreams().await;
    let client = gw.client().await;

    let tools = client.list_all_tools().await.unwrap();
    let tool_names = names(&tools, |t| &t.name);
    let local: Vec<_> = tool_names
        .iter()
        .filter(|n| n.starts_with("local__"))
        .collect();
    let remote: Vec<_> = tool_names
        .iter()
        .filter(|n| n.starts_with("remote__"))
        .collect();
    assert_eq!(
        local.len() + remote.len(),
        tool_names.len(),
        "{tool_names:?}"
    );
    assert!(tool_names.contains(&"local__echo".to_owned()));
    assert!(
        tool_names.contains(&"remote__echo".to_owned()),
        "colliding names both kept"
    );
    let first_remote = tool_names
        .iter()
        .position(|n| n.starts_with("remote__"))
        .unwrap();
    assert_eq!(first_remote, local.len(), "upstreams in config order");

    let prompts = client.list_all_prompts().await.unwrap();
    assert_eq!(
        names(&prompts, |p| &p.name),
        ["local__summarize", "remote__greet"]
    );

    let resources = client.list_all_resources().await.unwrap();
    assert_eq!(
        names(&resources, |r| &r.uri),
        [
            "local+demo://about",
            "remote+notes://index",
            "remote+notes://readme",
            "remote+notes://todo"
        ],
        "every page of the upstream's paginated list"
    );
    let templates = client.list_all_resource_templates().await.unwrap();
    assert_eq!(
        names(&templates, |t| &t.uri_template),
        ["local+demo://greeting/{name}", "remote+notes://note/{id}"]
    );
}

#[tokio::test]
async fn definitions_pass_through_unchanged_but_for_the_name() {
    let (notes, gw) = remote_notes().await;
    let through = gw.client().await.list_all_tools().await.unwrap();
    let direct = connect_client(&notes.url(), "direct")
        .await
        .list_all_tools()
        .await
        .unwrap();
    assert_eq!(through.len(), direct.len());
    for (through, direct) in through.iter().zip(&direct) {
        let mut expected = serde_json::to_value(direct).unwrap();
        expected["name"] = format!("remote__{}", direct.name).into();
        assert_eq!(serde_json::to_value(through).unwrap(), expected);
    }
}

#[tokio::test]
async fn conditional_prefix_with_one_upstream_leaves_names_alone() {
    let notes = NotesServer::start().await;
    let gw = GatewayBuilder::new()
        .section("[catalog]\nprefix_mode = \"conditional\"")
        .http("remote", &notes.url())
        .start()
        .await;
    let client = gw.client().await;
    let tools = client.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "echo"));
    let resources = client.list_all_resources().await.unwrap();
    assert_eq!(resources[0].uri, "notes://index");
    let read = client
        .read_resource(rmcp::model::ReadResourceRequestParams::new(
            "notes://note/5",
        ))
        .await
        .unwrap();
    let rmcp::model::ResourceContents::TextResourceContents { text, uri, .. } = &read.contents[0]
    else {
        panic!("text contents expected");
    };
    assert_eq!((text.as_str(), uri.as_str()), ("note 5", "notes://note/5"));
}

#[tokio::test]
async fn never_prefix_keeps_the_first_of_colliding_names() {
    let notes = NotesServer::start().await;
    let gw = GatewayBuilder::new()
        .section("[catalog]\nprefix_mode = \"never\"")
        .http("remote", &notes.url())
        .demo("local")
        .start()
        .await;
    let client = gw.client().await;
    let tools = client.list_all_tools().await.unwrap();
    let echoes = tools.iter().filter(|t| t.name == "echo").count();
    assert_eq!(echoes, 1);
    let result = crate::harness::call(&client, "echo", serde_json::json!({"text": "hi"}))
        .await
        .unwrap();
    assert_eq!(
        crate::harness::text(&result),
        "notes: hi",
        "the first upstream wins"
    );
    let result = crate::harness::call(&client, "text_stats", serde_json::json!({"text": "a b"}))
        .await
        .unwrap();
    assert_eq!(result.structured_content.unwrap()["words"], 2);
}

#[tokio::test]
async fn merged_lists_paginate_over_one_snapshot() {
    let notes = NotesServer::start().await;
    let gw = GatewayBuilder::new()
        .section("[catalog]\npage_size = 3")
        .demo("local")
        .http("remote", &notes.url())
        .start()
        .await;
    let client = gw.client().await;
    let first = client.list_tools(None).await.unwrap();
    assert_eq!(first.tools.len(), 3);
    let cursor = first.next_cursor.clone().expect("more pages");

    // The catalog changes while the client is paging…
    crate::harness::call(
        &client,
        "remote__add_tools",
        serde_json::json!({"steps": 1}),
    )
    .await
    .unwrap();
    assert!(
        crate::harness::eventually(std::time::Duration::from_secs(5), || {
            gw.gateway
                .live()
                .catalog
                .tools()
                .iter()
                .any(|t| t.name == "remote__dyn_1")
        })
        .await
    );
    // …and its cursor still pages through the snapshot it started on.
    let mut paged = names(&first.tools, |t| &t.name);
    let mut next = Some(cursor);
    while let Some(cursor) = next {
        let page = client
            .list_tools(Some(
                rmcp::model::PaginatedRequestParams::default().with_cursor(Some(cursor)),
            ))
            .await
            .unwrap();
        assert!(page.tools.len() <= 3);
        paged.extend(names(&page.tools, |t| &t.name));
        next = page.next_cursor;
    }
    assert!(
        !paged.contains(&"remote__dyn_1".to_owned()),
        "the old snapshot"
    );
    let before = paged.len();
    let fresh = client.list_all_tools().await.unwrap();
    assert_eq!(fresh.len(), before + 1, "a fresh listing sees the change");
    let unique: std::collections::HashSet<_> = paged.iter().collect();
    assert_eq!(unique.len(), paged.len(), "no entry twice");
}
