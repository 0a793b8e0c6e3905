//! `[[quota]]` on one gateway: a quota counts only the principals its `who` names and the
//! calls it covers; a concurrency cap refuses a second call while the first runs and gives
//! the place back when it ends; a daily count refuses once spent (a refused call spends
//! nothing); `per = "everyone"` counts all its principals together. A refusal is HTTP 429
//! with `Retry-After`, and its JSON-RPC error names the quota and the limit.

use serde_json::{Value, json};

use crate::harness::{
    GatewayBuilder, INITIALIZE, TestGateway, api_key, api_keys_section, post_mcp,
};

async fn gateway() -> TestGateway {
    GatewayBuilder::new()
        .section(&format!(
            "[[quota]]\nname = \"alice-slow\"\nwho = {{ principals = [\"user:key:alice\"] }}\n\
             tools = [\"demo:slow_task\"]\nconcurrent = 1\ndaily = 3\n\n\
             [[quota]]\nname = \"team-echo\"\nper = \"everyone\"\ntools = [\"demo:echo\"]\n\
             rate = \"2/minute\"\n\n{}",
            api_keys_section(&["alice", "bob"])
        ))
        .demo("demo")
        .start()
        .await
}

async fn session(gw: &TestGateway, user: &str) -> String {
    let bearer = format!("Bearer {}", api_key(user));
    let answer = post_mcp(gw, Some(&bearer), None, INITIALIZE).await;
    assert_eq!(answer.status(), 200);
    answer.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned()
}

/// A tool call by `user` in `session`: its status, `Retry-After`, and the JSON-RPC answer.
async fn call(
    gw: &TestGateway,
    user: &str,
    session: &str,
    tool: &str,
    arguments: Value,
) -> (u16, Option<u64>, Value) {
    let bearer = format!("Bearer {}", api_key(user));
    let body = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                      "params": {"name": tool, "arguments": arguments}});
    let answer = post_mcp(gw, Some(&bearer), Some(session), body.to_string()).await;
    let status = answer.status().as_u16();
    let retry_after = answer
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok()?.parse().ok());
    let text = answer.text().await.unwrap();
    let message = text
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .chain(std::iter::once(text.as_str()))
        .find_map(|line| serde_json::from_str::<Value>(line).ok())
        .unwrap_or_else(|| panic!("no answer in {text}"));
    (status, retry_after, message)
}

fn assert_beyond(answer: &(u16, Option<u64>, Value), quota: &str, limit: &str) {
    let (status, retry_after, body) = answer;
    assert_eq!(*status, 429, "{body}");
    assert!(retry_after.is_some_and(|s| s >= 1), "{retry_after:?}");
    assert_eq!(body["error"]["code"], -32029, "{body}");
    assert_eq!(body["error"]["data"]["quota"], quota, "{body}");
    assert_eq!(body["error"]["data"]["limit"], limit, "{body}");
    assert!(
        body["error"]["data"]["resetsAt"].as_u64().is_some(),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotas_count_whom_they_name_and_what_they_cover() {
    let gw = gateway().await;
    let (alice, bob) = (session(&gw, "alice").await, session(&gw, "bob").await);

    // One of Alice's slow calls at a time; Bob is not counted.
    let running = {
        let gw = &gw;
        let first = call(
            gw,
            "alice",
            &alice,
            "demo__slow_task",
            json!({"seconds": 2}),
        );
        let second = async {
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            let refused = call(
                gw,
                "alice",
                &alice,
                "demo__slow_task",
                json!({"seconds": 0}),
            )
            .await;
            let other = call(gw, "bob", &bob, "demo__slow_task", json!({"seconds": 0})).await;
            (refused, other)
        };
        tokio::join!(first, second)
    };
    let (first, (refused, bobs)) = running;
    assert_eq!(first.0, 200, "{first:?}");
    assert_beyond(&refused, "alice-slow", "concurrent");
    assert_eq!(bobs.0, 200, "{bobs:?}");

    // The place is back; the refused call spent nothing of the daily three.
    let quick = || {
        call(
            &gw,
            "alice",
            &alice,
            "demo__slow_task",
            json!({"seconds": 0}),
        )
    };
    for _ in 0..2 {
        let done = quick().await;
        assert_eq!(done.0, 200, "{done:?}");
    }
    let spent = quick().await;
    assert_beyond(&spent, "alice-slow", "daily");
    assert!(spent.1.unwrap() > 60, "a day's window: {:?}", spent.1);

    // Two echo calls a minute for everyone together; the upstream's other tools not covered.
    let echo = json!({"text": "hi"});
    assert_eq!(
        call(&gw, "alice", &alice, "demo__echo", echo.clone())
            .await
            .0,
        200
    );
    assert_eq!(
        call(&gw, "bob", &bob, "demo__echo", echo.clone()).await.0,
        200
    );
    let third = call(&gw, "alice", &alice, "demo__echo", echo).await;
    assert_beyond(&third, "team-echo", "rate");
    let add = call(&gw, "bob", &bob, "demo__add", json!({"a": 1, "b": 2})).await;
    assert_eq!(add.0, 200, "{add:?}");

    let metrics = gw.metrics_text().await;
    for series in [
        "switchyard_quota_checks_total{outcome=\"admitted\",quota=\"alice-slow\"} 3",
        "switchyard_quota_checks_total{outcome=\"refused\",quota=\"alice-slow\"} 2",
        "switchyard_quota_checks_total{outcome=\"refused\",quota=\"team-echo\"} 1",
    ] {
        assert!(metrics.contains(series), "{series}: {metrics}");
    }
    crate::operate::assert_dashboard_series(&metrics, "switchyard_quota_");
}
