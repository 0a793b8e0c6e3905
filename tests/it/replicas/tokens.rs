//! OAuth across replicas: one authorization (its link shared, its callback landing on any
//! replica) serves every replica, and a token one replica refreshes is the one the others use,
//! never a refresh token spent twice: the provider rotates refresh tokens and revokes the
//! whole grant when one is reused.

use std::time::Duration;

use serde_json::{Value, json};

use super::cluster::{Cluster, post, raw_session};
use crate::{
    fixtures::{
        oauth_upstream::{Browser, OAuthUpstream},
        redis::RedisServer,
    },
    harness::GatewayProcess,
};

const SOON: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_refreshed_by_one_replica_is_used_by_the_others() {
    let redis = RedisServer::start().await;
    // A 6 s token is due 1.5 s before it expires.
    let upstream = OAuthUpstream::start(&["--access-token-ttl=6", "--interactions=auto"]).await;
    let mcp = upstream.mcp_url().to_owned();
    let cluster = Cluster::start_with(&redis, 300, |origin| {
        // Dynamic registration: the registration is shared too.
        format!(
            "[oauth]\npublic_url = \"{origin}\"\n\n[upstreams.secure]\nurl = \"{mcp}\"\n\
             restart = {{ delay_ms = 100, max_delay_ms = 400 }}\noauth = {{}}\n"
        )
    })
    .await;

    // Every replica wants the authorization, and shows the same link.
    let mut links = Vec::new();
    for replica in &cluster.replicas {
        links.push(wait_for_link(replica).await);
    }
    assert!(links.iter().all(|l| *l == links[0]), "one link: {links:?}");

    // The provider sends the browser back through the balancer, to whichever replica.
    let browser = Browser::new();
    let callback = browser.callback_url(&links[0]).await;
    assert!(
        callback.starts_with(&cluster.balancer.origin()),
        "{callback}"
    );
    let (status, page) = browser.open(&callback).await;
    assert_eq!(status, 200, "{page}");
    cluster.wait_ready("secure", SOON).await;
    let stats = upstream.stats().await;
    assert_eq!(stats["as"]["authorizations"], 1, "{stats}");
    assert_eq!(stats["as"]["registrations"], 1, "{stats}");

    // Calls through the balancer for about three token lifetimes: bursts of concurrent calls
    // (so that replicas find the token due at once), then three calls one after another, each
    // landing on the next replica: which access token each carried, and which replica sent it.
    let url = cluster.balancer.url();
    let session = raw_session(&url).await;
    let mut seen: Vec<(String, usize)> = Vec::new();
    let until = tokio::time::Instant::now() + Duration::from_secs(16);
    let mut n = 0;
    while tokio::time::Instant::now() < until {
        let burst = (0..6).map(|i| post(&url, Some(&session), whoami(1000 + n * 10 + i)));
        for (status, body) in futures::future::join_all(burst).await {
            assert_eq!(status, 200, "{body}");
            assert_eq!(claims(&body).unwrap_or_default()["sub"], "alice", "{body}");
        }
        for _ in 0..3 {
            let before = cluster.balancer.served();
            let (status, body) = post(&url, Some(&session), whoami(n)).await;
            assert_eq!(status, 200, "call {n}: {body}");
            let claims = claims(&body).unwrap_or_else(|| panic!("call {n}: {body}"));
            assert_eq!(claims["sub"], "alice", "{claims}");
            let after = cluster.balancer.served();
            let replica = (0..3).find(|&i| after[i] > before[i]).unwrap();
            seen.push((claims["jti"].as_str().unwrap().to_owned(), replica));
            n += 1;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let stats = upstream.stats().await;
    assert_eq!(
        stats["as"]["grants_revoked"], 0,
        "no refresh token reused: {stats}"
    );
    assert_eq!(stats["as"]["authorizations"], 1, "{stats}");
    let refreshes = stats["as"]["tokens"]["refresh_token"].as_u64().unwrap_or(0);
    // About one refresh per lifetime for all three replicas together; each on its own would
    // make three.
    assert!(
        (2..=5).contains(&refreshes),
        "{refreshes} refreshes: {stats}"
    );
    let mut tokens: Vec<&str> = seen.iter().map(|(jti, _)| jti.as_str()).collect();
    tokens.dedup();
    assert!(
        tokens.len() >= 3,
        "tokens were renewed during the run: {tokens:?}"
    );
    // Each token renewed during the run (not the first, nor the one in use at the end) was
    // used by all three replicas.
    for jti in &tokens[1..tokens.len() - 1] {
        let mut replicas: Vec<usize> = seen
            .iter()
            .filter(|(seen, _)| seen == jti)
            .map(|(_, replica)| *replica)
            .collect();
        replicas.sort_unstable();
        replicas.dedup();
        assert_eq!(
            replicas,
            [0, 1, 2],
            "token {jti} used by replicas {replicas:?}"
        );
    }

    // Nothing readable of the tokens is in Redis.
    let dump = redis.dump("switchyard:oauth-*").await;
    let kinds: Vec<&str> = dump.iter().map(|(key, _)| key.as_str()).collect();
    assert!(
        kinds
            .iter()
            .any(|k| k.starts_with("switchyard:oauth-tokens:"))
            && kinds
                .iter()
                .any(|k| k.starts_with("switchyard:oauth-clients:"))
            && kinds
                .iter()
                .any(|k| k.starts_with("switchyard:oauth-index:")),
        "{kinds:?}"
    );
    let last = tokens[tokens.len() - 1];
    for (key, value) in &dump {
        let value = String::from_utf8_lossy(value);
        for secret in [last, "alice", "eyJ", "client_id"] {
            assert!(
                !value.contains(secret),
                "`{secret}` readable in {key}: {value}"
            );
        }
    }
}

/// The link `replica` shows on its pending list, once it wants the authorization.
async fn wait_for_link(replica: &GatewayProcess) -> String {
    crate::harness::wait_for_link(replica.addr, &replica.admin_token()).await
}

fn whoami(id: u32) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": "secure__whoami", "arguments": {}}})
}

/// The claims `whoami` answered with, from a JSON or event-stream body.
fn claims(body: &str) -> Option<Value> {
    let message = body
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(str::trim)
        .find(|data| !data.is_empty())
        .unwrap_or(body);
    let message: Value = serde_json::from_str(message).ok()?;
    let text = message["result"]["content"][0]["text"].as_str()?;
    serde_json::from_str(text).ok()
}
