//! Quotas and `[limits]` across replicas: three gateways behind a round-robin balancer count
//! one principal's calls in Redis together, so a quota of 30 calls a minute lets 30 through,
//! wherever they land, and refuses the 31st with 429, `Retry-After` and the quota's name; the
//! per-principal `[limits]` hold the same way. With Redis down, each replica counts alone its
//! share of each quota (the quota divided by the replicas that were beating).

use std::time::Duration;

use serde_json::{Value, json};

use super::cluster::Cluster;
use crate::fixtures::redis::RedisServer;

/// A stateless 2026-07-28 request of `method` (a tool call of the demo's `tool`, or a
/// list): its status, `Retry-After` and body.
async fn modern(url: &str, method: &str, tool: &str) -> (u16, Option<u64>, Value) {
    let mut params = json!({"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"}
    }});
    let mut request = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if method == "tools/call" {
        params["name"] = json!(tool);
        params["arguments"] = json!({"text": "hi"});
        request = request.header("mcp-name", tool);
    }
    let response = request
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok()?.parse().ok());
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or_else(|_| json!({"text": text}));
    (status, retry_after, body)
}

async fn metric_sum(cluster: &Cluster, series: &str) -> f64 {
    let mut sum = 0.0;
    for replica in &cluster.replicas {
        let text = replica.metrics_text().await;
        sum += text
            .lines()
            .filter(|line| line.starts_with(series))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>();
    }
    sum
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quota_and_the_limits_hold_across_three_replicas() {
    let redis = RedisServer::start().await;
    let cluster = Cluster::start_with(&redis, 300, |_| {
        "[[quota]]\nname = \"echo-per-user\"\ntools = [\"demo:echo\"]\nrate = \"30/minute\"\n\n\
         [limits]\nrequests_per_second_per_principal = 0.001\nburst_per_principal = 80\n"
            .to_owned()
    })
    .await;
    let url = cluster.balancer.url();
    let served_before = cluster.balancer.served();

    let mut admitted = 0;
    let mut refused = None;
    for _ in 0..40 {
        let (status, retry_after, body) = modern(&url, "tools/call", "demo__echo").await;
        match status {
            200 => {
                assert!(body.get("result").is_some(), "{body}");
                admitted += 1;
            }
            429 => {
                refused = Some((retry_after, body));
                break;
            }
            other => panic!("{other}: {body}"),
        }
    }
    assert!(
        (29..=31).contains(&admitted),
        "{admitted} calls admitted of 30"
    );
    let (retry_after, body) = refused.expect("the call beyond the quota is refused");
    assert_eq!(body["error"]["code"], -32029, "{body}");
    assert_eq!(body["error"]["data"]["quota"], "echo-per-user", "{body}");
    assert_eq!(body["error"]["data"]["limit"], "rate", "{body}");
    assert!(matches!(retry_after, Some(1..=3)), "{retry_after:?}");
    let served = cluster.balancer.served();
    for replica in 0..3 {
        assert!(
            served[replica] >= served_before[replica] + 9,
            "every replica served a third: {served:?}"
        );
    }
    assert_eq!(
        metric_sum(
            &cluster,
            "switchyard_quota_checks_total{outcome=\"admitted\",quota=\"echo-per-user\"}"
        )
        .await,
        f64::from(admitted)
    );

    // `[limits]`: a burst of 80 requests for the principal, across the replicas. So far
    // `admitted + 1` (the refused call got through the limits, then met the quota).
    let mut through = admitted + 1;
    let limited = loop {
        let (status, _, body) = modern(&url, "tools/list", "").await;
        match status {
            200 => through += 1,
            429 => break body,
            other => panic!("{other}: {body}"),
        }
        assert!(through <= 100, "the limits never refused");
    };
    assert!(
        (79..=81).contains(&through),
        "{through} requests through a burst of 80"
    );
    assert!(
        limited["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("requests a second for this user")),
        "{limited}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_down_each_replica_counts_its_share_of_a_quota() {
    let mut redis = RedisServer::start().await;
    let cluster = Cluster::start_with(&redis, 300, |_| {
        "[[quota]]\nname = \"echo-shared\"\nper = \"everyone\"\ntools = [\"demo:echo\"]\nrate = \"30/minute\"\n"
            .to_owned()
    })
    .await;
    // The replicas beat (every 2 s) and know they are three.
    tokio::time::sleep(Duration::from_secs(3)).await;
    redis.stop();
    let url = cluster.balancer.url();
    let admitted = count_admitted(&url, "demo__echo", 45).await;
    assert!(
        (27..=31).contains(&admitted),
        "three replicas, ten each: {admitted} admitted"
    );
    let local = metric_sum(
        &cluster,
        "switchyard_quota_checks_total{outcome=\"local\",quota=\"echo-shared\"}",
    )
    .await;
    assert!(local >= f64::from(admitted), "{local}");
    redis.restart().await;
}

/// Calls `tool` up to `tries` times, until the first refusal: how many were admitted.
async fn count_admitted(url: &str, tool: &str, tries: u32) -> u32 {
    let mut admitted = 0;
    for _ in 0..tries {
        let (status, _, body) = modern(url, "tools/call", tool).await;
        match status {
            200 if body.get("result").is_some() => admitted += 1,
            429 => return admitted,
            other => panic!("{other}: {body}"),
        }
    }
    admitted
}
