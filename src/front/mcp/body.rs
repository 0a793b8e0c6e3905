//! A request's body read whole, as the MCP endpoint and the pass-through routes read it: within
//! `[server] max_request_body_bytes` (413 beyond it) and the client timeout (408), or the answer
//! refusing it.

use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::{BodyExt, LengthLimitError, Limited};

use super::reply;

/// Reads `body` whole, at most `max` bytes within `timeout`; or gives the answer refusing it.
pub async fn read_whole<B>(body: B, max: usize, timeout: Duration) -> Result<Bytes, Response<Body>>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    if body.is_end_stream() {
        return Ok(Bytes::new());
    }
    let Ok(read) = tokio::time::timeout(timeout, Limited::new(body, max).collect()).await else {
        let message = format!(
            "Request Timeout: the body did not arrive within {}s",
            timeout.as_secs_f64()
        );
        return Err(reply::refusal(StatusCode::REQUEST_TIMEOUT, &message));
    };
    match read {
        Ok(body) => Ok(body.to_bytes()),
        Err(error) if error.is::<LengthLimitError>() => {
            let message = format!("Payload Too Large: request body exceeds {max} bytes");
            Err(reply::refusal(StatusCode::PAYLOAD_TOO_LARGE, &message))
        }
        Err(_) => Err(reply::refusal(
            StatusCode::BAD_REQUEST,
            "Bad Request: the body could not be read",
        )),
    }
}
