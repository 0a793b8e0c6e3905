//! `transport = "auto"`: which HTTP transport a server speaks, found the way the MCP spec's
//! backward-compatibility section describes. POST an `initialize` to the URL: if the server takes
//! it, it speaks streamable HTTP; a 404, 405 or 400 without a JSON-RPC error body means it is a
//! legacy HTTP+SSE server. (A 2026-07-28-only server refuses `initialize` with a JSON-RPC error,
//! often under a 404: that is streamable HTTP too.) The session the probe opened is deleted.

use http::header;
use serde_json::json;
use url::Url;

use super::UpstreamError;
use crate::{
    config::HttpProtocol,
    hook::{RequestHeaders, RequestHook},
};

/// Probes `url` and says which transport it speaks (`StreamableHttp` or `Sse`).
pub async fn detect(
    http: &reqwest::Client,
    url: &Url,
    hook: &dyn RequestHook,
) -> Result<HttpProtocol, UpstreamError> {
    // Not the URL itself: its query may carry a secret.
    let failed = |reason: String| UpstreamError::Initialize(format!("probing its URL: {reason}"));
    let mut extra = RequestHeaders::new();
    hook.prepare(&mut extra)
        .done()
        .await
        .map_err(|e| failed(e.to_string()))?;
    let initialize = json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "switchyard-probe", "version": env!("CARGO_PKG_VERSION")}
        }
    });
    let response = http
        .post(url.clone())
        .headers(extra.clone())
        .header(header::ACCEPT, "application/json, text/event-stream")
        .json(&initialize)
        .send()
        .await
        .map_err(|e| failed(crate::error::cause(&e)))?;
    let status = response.status();
    let session = response.headers().get("mcp-session-id").cloned();
    let protocol = match status.as_u16() {
        200..=299 | 401 | 403 => HttpProtocol::StreamableHttp,
        400 | 404 | 405 => {
            let body = response.text().await.unwrap_or_default();
            if is_json_rpc_error(&body) {
                HttpProtocol::StreamableHttp
            } else {
                HttpProtocol::Sse
            }
        }
        _ => return Err(failed(format!("HTTP {status}"))),
    };
    if let Some(session) = session {
        // Best effort: the probe's session is of no further use.
        let _ = http
            .delete(url.clone())
            .headers(extra)
            .header("mcp-session-id", session)
            .send()
            .await;
    }
    Ok(protocol)
}

fn is_json_rpc_error(body: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(body)
        .is_ok_and(|value| value.get("jsonrpc").is_some() && value.get("error").is_some())
}

#[cfg(test)]
mod tests {
    use super::is_json_rpc_error;

    #[test]
    fn recognizes_json_rpc_error_bodies() {
        assert!(is_json_rpc_error(
            r#"{"jsonrpc":"2.0","id":0,"error":{"code":-32600,"message":"x"}}"#
        ));
        assert!(!is_json_rpc_error("Bad Request"));
        assert!(!is_json_rpc_error(r#"{"error":"no"}"#));
    }
}
