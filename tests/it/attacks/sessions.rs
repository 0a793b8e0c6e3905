//! Sessions under a changing token: a session pins its user, but each request is judged by
//! the credentials it carries, so a user removed from a group (a new token without it) loses
//! what the group allowed at once, on the session they already had.

use serde_json::json;

use crate::{
    fixtures::issuer::{ISSUER, Issuer, claims, sign},
    harness::{GatewayBuilder, INITIALIZE, post_mcp},
};

#[tokio::test]
async fn a_demoted_token_on_an_old_session_cannot_call_the_tool() {
    let issuer = Issuer::start().await;
    let gw = GatewayBuilder::new()
        .section(&format!(
            "[auth]\n[auth.jwt]\nissuer = {ISSUER:?}\njwks_url = {:?}\n\n\
             [[policy]]\nallow.tools = [\"demo:echo\"]\n\n\
             [[policy]]\nwho.groups = [\"admins\"]\nallow.tools = [\"demo:*\"]\n",
            issuer.jwks_url
        ))
        .demo("demo")
        .start()
        .await;
    let token = |groups: &[&str]| {
        let mut claims = claims("dana", &gw.url());
        claims["groups"] = json!(groups);
        format!("Bearer {}", sign(&claims, "issuer.key", "k1"))
    };
    let admin = token(&["admins"]);
    let demoted = token(&[]);

    let opened = post_mcp(&gw, Some(&admin), None, INITIALIZE).await;
    assert_eq!(opened.status(), 200);
    let session = opened.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    post_mcp(&gw, Some(&admin), Some(&session), initialized).await;
    let add = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"demo__add","arguments":{"a":1,"b":2}}}"#;
    let answer = post_mcp(&gw, Some(&admin), Some(&session), add).await;
    assert!(answer.text().await.unwrap().contains("\"sum\""));

    // The same user, the same session, a token without the group.
    let answer = post_mcp(&gw, Some(&demoted), Some(&session), add).await;
    assert_eq!(answer.status(), 200, "the session is still theirs");
    let body = answer.text().await.unwrap();
    assert!(
        !body.contains("\"sum\""),
        "the demoted token called the tool: {body}"
    );
    assert!(
        body.contains("-32602") || body.contains("unknown tool"),
        "{body}"
    );
    let list = r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#;
    let listed = post_mcp(&gw, Some(&demoted), Some(&session), list).await;
    let listed = listed.text().await.unwrap();
    assert!(
        listed.contains("demo__echo") && !listed.contains("demo__add"),
        "{listed}"
    );
    // Promoted again, the tool is back on that session.
    let answer = post_mcp(&gw, Some(&admin), Some(&session), add).await;
    assert!(answer.text().await.unwrap().contains("\"sum\""));
}
