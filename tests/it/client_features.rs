//! Tools an upstream lists only to clients that declared a capability they use (the official
//! server-everything: elicitation, sampling, roots, tasks). The gateway's own connection
//! declares them all, yet through it each client is listed what it would be listed directly,
//! and a tool it is not listed is unknown to it (before, a client without elicitation was
//! listed `trigger-elicitation-request`, and calling it failed).

use std::{collections::BTreeSet, time::Duration};

use rmcp::{ServiceExt, transport::TokioChildProcess};
use serde_json::json;

use crate::{
    deps,
    fixtures::everything,
    harness::{GatewayBuilder, Recorder, TestGateway, call},
};

type Names = BTreeSet<String>;

/// The tools server-everything lists to `client`, connected to it directly over stdio.
async fn listed_directly(client: Recorder) -> Names {
    let mut command = tokio::process::Command::new(deps::node22());
    command.arg(everything::entry()).arg("stdio");
    let direct = client
        .serve(TokioChildProcess::new(command).unwrap())
        .await
        .unwrap();
    let tools = direct.list_all_tools().await.unwrap();
    direct.cancel().await.unwrap();
    tools
        .into_iter()
        .map(|tool| tool.name.into_owned())
        .collect()
}

/// The tools of `everything` the gateway lists to `client`, once they are what `expected`
/// says (the gateway finds out what each tool needs after the upstream is up), or as they
/// are after a while.
async fn listed_through(gw: &TestGateway, client: Recorder, expected: &Names) -> Names {
    let session = client.connect(&gw.url()).await;
    let mut listed = Names::new();
    for _ in 0..120 {
        let tools = session.list_all_tools().await.unwrap();
        listed = (tools.iter())
            .filter_map(|tool| tool.name.strip_prefix("everything__"))
            .map(str::to_owned)
            .collect();
        if listed == *expected {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    session.cancel().await.unwrap();
    listed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_client_is_listed_the_tools_it_would_be_listed_directly() {
    let gw = GatewayBuilder::new()
        .upstream("everything", &everything::stdio_upstream())
        .start()
        .await;
    let plain = listed_directly(Recorder::plain("plain")).await;
    let capable = listed_directly(Recorder::capable("capable")).await;
    assert!(!plain.contains("trigger-elicitation-request"), "{plain:?}");
    assert!(
        capable.contains("trigger-elicitation-request"),
        "{capable:?}"
    );

    for (client, directly) in [("plain", &plain), ("capable", &capable)] {
        let recorder = match client {
            "plain" => Recorder::plain(client),
            _ => Recorder::capable(client),
        };
        let through = listed_through(&gw, recorder, directly).await;
        assert_eq!(
            &through, directly,
            "{client}: through the gateway, and directly"
        );
    }

    // A 2026-07-28 client that declares nothing is not listed it either, and it is unknown.
    let modern = gw.modern_client().await;
    let tools = modern.list_all_tools().await.unwrap();
    assert!(
        !tools
            .iter()
            .any(|tool| tool.name == "everything__trigger-elicitation-request"),
        "{tools:?}"
    );
    let error = call(
        &modern,
        "everything__trigger-elicitation-request",
        json!({}),
    )
    .await
    .unwrap_err();
    assert!(error.to_string().contains("unknown tool"), "{error}");
}
