//! Resource policy against URI tricks: `..`, `//`, `./`, escapes and case do not carry a read
//! out of an allowed prefix or past a denied one, with an upstream that would follow them.

use rmcp::model::ReadResourceRequestParams;

use crate::{
    fixtures::{files, served::Served},
    harness::{GatewayBuilder, TestGateway, connect_client},
};

/// A directory with `public/readme.txt` and, beside it, `secret.txt`.
fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("public")).unwrap();
    std::fs::write(dir.path().join("public/readme.txt"), "hello").unwrap();
    std::fs::write(dir.path().join("secret.txt"), "the secret").unwrap();
    dir
}

async fn gateway(files: &Served, policy: &str) -> TestGateway {
    GatewayBuilder::new()
        .section(policy)
        .http("files", &files.url())
        .start()
        .await
}

/// What reading `uri` through the gateway gives: the text, or the error.
async fn read(gw: &TestGateway, uri: &str) -> Result<String, String> {
    let client = gw.client().await;
    let answer = client
        .read_resource(ReadResourceRequestParams::new(uri))
        .await;
    client.cancel().await.unwrap();
    match answer {
        Ok(result) => Ok(format!("{:?}", result.contents)),
        Err(error) => Err(error.to_string()),
    }
}

#[tokio::test]
async fn dot_dots_and_escapes_cannot_leave_an_allowed_prefix() {
    let dir = tree();
    let files = files::serve(dir.path().to_owned()).await;
    let gw = gateway(
        &files,
        "[[policy]]\nallow.resources = [\"files:file:///public/*\"]\n",
    )
    .await;
    assert!(
        read(&gw, "files+file:///public/readme.txt")
            .await
            .unwrap()
            .contains("hello")
    );
    assert!(read(&gw, "files+file:///secret.txt").await.is_err());
    // Asked directly, the server does give the secret away.
    let direct = connect_client(&files.url(), "direct").await;
    let leaked = direct
        .read_resource(ReadResourceRequestParams::new(
            "file:///public/../secret.txt",
        ))
        .await
        .unwrap();
    assert!(format!("{:?}", leaked.contents).contains("the secret"));
    direct.cancel().await.unwrap();
    for trick in [
        "files+file:///public/../secret.txt",
        "files+file:///public/./../secret.txt",
        "files+file:///public/%2e%2e/secret.txt",
        "files+file:///public/%2E%2E%2Fsecret.txt",
        "files+file:///public/..%2fsecret.txt",
        "files+file:///public//../../secret.txt",
        "files+file:///public/..\\secret.txt",
    ] {
        let answer = read(&gw, trick).await;
        assert!(answer.is_err(), "{trick} read {answer:?}");
        assert!(!format!("{answer:?}").contains("the secret"), "{trick}");
    }
}

#[tokio::test]
async fn case_escapes_and_slashes_cannot_dodge_a_deny_rule() {
    let dir = tree();
    let files = files::serve(dir.path().to_owned()).await;
    let gw = gateway(
        &files,
        "[[policy]]\ndeny.resources = [\"files:file:///secret*\"]\n",
    )
    .await;
    assert!(read(&gw, "files+file:///public/readme.txt").await.is_ok());
    for trick in [
        "files+file:///secret.txt",
        "files+FILE:///secret.txt",
        "files+file:///%73ecret.txt",
        "files+file:////secret.txt",
        "files+file:///./secret.txt",
        "files+file:///public/../secret.txt",
    ] {
        let answer = read(&gw, trick).await;
        assert!(answer.is_err(), "{trick} read {answer:?}");
    }
}
