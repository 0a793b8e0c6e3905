//! The header checks of the streamable HTTP transport: what a request must accept and send, the
//! `MCP-Protocol-Version` header, and the SEP-2243 headers (`Mcp-Method`, `Mcp-Name`,
//! `Mcp-Param-*`) that must agree with the body for 2026-07-28 requests.

use http::{HeaderMap, header};

use crate::{
    catalog::ParamHeader,
    protocol::{MCP_PROTOCOL_VERSION, is_known_version, read_header_text},
    wire::{Fields, string},
};

pub use crate::wire::media::{EVENT_STREAM, JSON};

/// The media types a request accepts (`q=0` ones excluded), in every `Accept` line.
fn accepted(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(|item| {
            let mut parts = item.split(';');
            let essence = parts.next()?.trim();
            let refused = parts.any(|param| {
                param
                    .trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            (!refused && !essence.is_empty()).then_some(essence)
        })
}

/// Whether the request accepts `media` (exactly, not through a wildcard).
pub fn accepts(headers: &HeaderMap, media: &str) -> bool {
    accepted(headers).any(|essence| essence.eq_ignore_ascii_case(media))
}

/// Whether the request accepts both JSON and event streams, as every POST must.
pub fn accepts_both(headers: &HeaderMap) -> bool {
    // What clients send nearly always, recognized without taking the header apart.
    let mut lines = headers.get_all(header::ACCEPT).iter();
    if let (Some(only), None) = (lines.next(), lines.next())
        && matches!(
            only.as_bytes(),
            b"application/json, text/event-stream" | b"text/event-stream, application/json"
        )
    {
        return true;
    }
    accepts(headers, JSON) && accepts(headers, EVENT_STREAM)
}

/// The `MCP-Protocol-Version` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VersionHeader<'a> {
    /// None sent: 2025-03-26, or the version a 2026-07-28 request names in `_meta`.
    Absent,
    Known(&'a str),
    Unknown(&'a str),
    /// Not text.
    Invalid,
}

impl<'a> VersionHeader<'a> {
    pub fn of(headers: &'a HeaderMap) -> Self {
        match headers.get(MCP_PROTOCOL_VERSION) {
            None => VersionHeader::Absent,
            Some(value) => match value.to_str() {
                Ok(version) if is_known_version(version) => VersionHeader::Known(version),
                Ok(version) => VersionHeader::Unknown(version),
                Err(_) => VersionHeader::Invalid,
            },
        }
    }

    /// The version it names, known or not.
    pub fn text(self) -> Option<&'a str> {
        match self {
            VersionHeader::Known(version) | VersionHeader::Unknown(version) => Some(version),
            VersionHeader::Absent | VersionHeader::Invalid => None,
        }
    }
}

/// Where the `Mcp-Name` of a method is in its params.
fn name_field(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => Some("uri"),
        "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
        _ => None,
    }
}

/// Checks the SEP-2243 headers of a 2026-07-28 message against its body: `Mcp-Method` must
/// name the method, `Mcp-Name` the tool, prompt, resource or task, and each `Mcp-Param-*` the
/// argument the tool's schema annotates. The reason, when they do not agree.
pub fn standard_headers(
    headers: &HeaderMap,
    method: &str,
    params: Option<&Fields<'_>>,
    param_headers: Option<&[ParamHeader]>,
) -> Result<(), String> {
    match single(headers, "mcp-method")? {
        None => return Err("missing required Mcp-Method header".into()),
        Some(value) if value != method => {
            return Err(format!(
                "Mcp-Method header `{value}` does not match body method `{method}`"
            ));
        }
        Some(_) => {}
    }
    let expected = name_field(method)
        .and_then(|field| params?.get(field))
        .and_then(string);
    if let Some(expected) = expected {
        let sent = single(headers, "mcp-name")?
            .ok_or_else(|| format!("missing required Mcp-Name header for `{method}`"))?;
        let sent = read_header_text(sent).ok_or("Mcp-Name header is not valid Base64")?;
        if sent != expected {
            return Err(format!(
                "Mcp-Name header `{sent}` does not match body value `{expected}`"
            ));
        }
    }
    let (Some(annotated), "tools/call") = (param_headers, method) else {
        return Ok(());
    };
    let arguments = params.and_then(|params| params.get("arguments"));
    for param in annotated {
        let value = arguments.and_then(|arguments| param.text_in(arguments));
        let prop = param.path.join(".");
        let header = &param.header;
        match (single(headers, header)?, value) {
            (None, None) => {}
            (Some(_), None) => {
                return Err(format!(
                    "unexpected {header} header for absent or null `{prop}`"
                ));
            }
            (None, Some(_)) => return Err(format!("missing {header} header for `{prop}`")),
            (Some(sent), Some(value)) => {
                let sent = read_header_text(sent)
                    .ok_or_else(|| format!("{header} header is not valid Base64"))?;
                if sent != value {
                    return Err(format!(
                        "{header} header `{sent}` does not match body value `{value}`"
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The one value of header `name`: these headers may appear at most once, as visible text.
fn single<'a>(headers: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, String> {
    let mut values = headers.get_all(name).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(format!("duplicate {name} header"));
    }
    value
        .to_str()
        .map(|value| Some(value.trim()))
        .map_err(|_| format!("{name} header contains invalid characters"))
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;
    use serde_json::value::RawValue;

    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    #[test]
    fn accept_lists_are_read_in_any_order_without_refused_types() {
        assert!(accepts_both(&headers(&[(
            "accept",
            "application/json, text/event-stream"
        )])));
        assert!(!accepts_both(&headers(&[("accept", "application/json")])));
        let both = headers(&[("accept", "text/event-stream, application/json;q=0.9")]);
        assert!(accepts_both(&both));
        assert!(accepts(&both, JSON) && accepts(&both, EVENT_STREAM));
        let split = headers(&[
            ("accept", "application/json"),
            ("accept", "text/event-stream"),
        ]);
        assert!(accepts(&split, EVENT_STREAM));
        let refused = headers(&[("accept", "application/json, text/event-stream;q=0")]);
        assert!(!accepts(&refused, EVENT_STREAM));
        assert!(!accepts(&headers(&[("accept", "*/*")]), JSON));
    }

    fn params(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    #[test]
    fn method_and_name_must_agree_with_the_body() {
        let body = params(r#"{"name":"echo","arguments":{}}"#);
        let fields = Fields::of(&body).unwrap();
        let check = |pairs: &[(&str, &str)]| {
            standard_headers(&headers(pairs), "tools/call", Some(&fields), None)
        };
        assert!(check(&[("mcp-method", "tools/call"), ("mcp-name", "  echo  ")]).is_ok());
        assert!(
            check(&[
                ("mcp-method", "tools/call"),
                ("mcp-name", "=?base64?ZWNobw==?=")
            ])
            .is_ok()
        );
        assert!(
            check(&[("mcp-method", "tools/call")])
                .unwrap_err()
                .contains("missing")
        );
        assert!(check(&[("mcp-method", "TOOLS/CALL"), ("mcp-name", "echo")]).is_err());
        assert!(check(&[("mcp-method", "tools/call"), ("mcp-name", "other")]).is_err());
        assert!(check(&[("mcp-name", "echo")]).is_err());
        assert!(
            check(&[
                ("mcp-method", "tools/call"),
                ("mcp-method", "tools/call"),
                ("mcp-name", "echo")
            ])
            .unwrap_err()
            .contains("duplicate")
        );
        assert!(
            standard_headers(
                &headers(&[("mcp-method", "tools/list")]),
                "tools/list",
                None,
                None
            )
            .is_ok()
        );
    }

    #[test]
    fn annotated_arguments_must_be_repeated_in_their_headers() {
        let annotated = [ParamHeader {
            path: vec!["region".into()],
            header: "Mcp-Param-Region".into(),
            name: http::HeaderName::from_static("mcp-param-region"),
        }];
        let check = |body: &str, pairs: &[(&str, &str)]| {
            let body = params(body);
            let fields = Fields::of(&body).unwrap();
            let mut all = vec![("mcp-method", "tools/call"), ("mcp-name", "t")];
            all.extend_from_slice(pairs);
            standard_headers(
                &headers(&all),
                "tools/call",
                Some(&fields),
                Some(&annotated),
            )
        };
        let hello = r#"{"name":"t","arguments":{"region":"Hello"}}"#;
        assert!(check(hello, &[("mcp-param-region", "=?base64?SGVsbG8=?=")]).is_ok());
        assert!(check(hello, &[("mcp-param-region", "=?base64?SGVsbG8?=")]).is_err());
        assert!(check(hello, &[("mcp-param-region", "=?base64?SGVs!!!bG8=?=")]).is_err());
        assert!(check(hello, &[]).is_err());
        let literal = r#"{"name":"t","arguments":{"region":"SGVsbG8="}}"#;
        assert!(check(literal, &[("mcp-param-region", "SGVsbG8=")]).is_ok());
        let absent = r#"{"name":"t","arguments":{"region":null}}"#;
        assert!(check(absent, &[]).is_ok());
        assert!(check(absent, &[("mcp-param-region", "x")]).is_err());
        let number = r#"{"name":"t","arguments":{"region":42}}"#;
        assert!(check(number, &[("mcp-param-region", "42")]).is_ok());
    }
}
