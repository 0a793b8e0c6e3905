//! Checking an HTTP upstream's header rules. Nothing a client sends reaches an upstream unless
//! its `forward_headers` (or `rename_headers`) name it; the client's credentials and the
//! transport's own headers never do. `headers` are set on every request: fixed values (with
//! `${env:…}` and `${file:…}` read at load time) and values naming the user, filled in from
//! their validated token claims (`X-User = "${claim:sub}"`).

use std::str::FromStr;

use http::{HeaderName, HeaderValue};
use serde_json::Value;

use super::{
    keys::Checker,
    keys::{Entries, key_segment},
    upstream::RawUpstream,
};
use crate::principal::Principal;

/// Headers the transport sets itself; configuring them would break the protocol.
const RESERVED_HEADERS: &[&str] = &[
    "accept",
    "connection",
    "content-length",
    "content-type",
    "host",
    "keep-alive",
    "last-event-id",
    "mcp-method",
    "mcp-name",
    "mcp-protocol-version",
    "mcp-session-id",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Client headers that carry the client's own credentials: never passed on.
const CREDENTIALS: &[&str] = &["authorization", "cookie", "proxy-authorization"];

/// An upstream's configured headers: fixed values, and values naming the user.
type Headers = (
    Vec<(HeaderName, HeaderValue)>,
    Vec<(HeaderName, UserHeader)>,
);

/// A header value with the user's claims in it: literal text and claim names, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserHeader {
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Claim(String),
}

impl UserHeader {
    /// The value for `principal`; `None` (the header is left out) when a claim is missing or
    /// its value cannot be a header value. `sub` falls back to the subject an API key gives.
    pub fn render(&self, principal: &Principal) -> Option<HeaderValue> {
        let identity = principal.identity()?;
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Text(text) => out.push_str(text),
                Part::Claim(name) => match identity.claims.get(name) {
                    Some(Value::String(text)) => out.push_str(text),
                    Some(value @ (Value::Number(_) | Value::Bool(_))) => {
                        out.push_str(&value.to_string())
                    }
                    None if name == "sub" => out.push_str(&identity.subject),
                    _ => return None,
                },
            }
        }
        let mut value = HeaderValue::from_str(&out).ok()?;
        value.set_sensitive(true);
        Some(value)
    }
}

impl super::UpstreamConfig {
    /// The headers of a client's request that this upstream's rules pass on, under the names
    /// the upstream gets them by (none for a stdio upstream, or without rules).
    pub fn forwarded(&self, client: &http::HeaderMap) -> Vec<(HeaderName, HeaderValue)> {
        let super::TransportConfig::Http(http) = &self.transport else {
            return Vec::new();
        };
        http.forward_headers
            .iter()
            .flat_map(|(from, to)| client.get_all(from).iter().map(|v| (to.clone(), v.clone())))
            .collect()
    }
}

impl Checker<'_> {
    /// `headers = { … }` at `key`: the fixed ones, and those naming the user.
    pub(super) fn headers(&mut self, key: &str, raw: Option<&Entries<String>>) -> Headers {
        let mut fixed = Vec::new();
        let mut per_user = Vec::new();
        let Some(raw) = raw else {
            return (fixed, per_user);
        };
        for dup in &raw.duplicates {
            self.problem(
                format!("{key}.{}", key_segment(dup)),
                "is given more than once",
            );
        }
        for (name, value) in raw.iter() {
            let header_key = format!("{key}.{}", key_segment(name));
            let Some(header_name) = self.settable_header(&header_key, name) else {
                continue;
            };
            if value.contains("${claim:") {
                if let Some(template) = self.user_header(&header_key, value) {
                    per_user.push((header_name, template));
                }
                continue;
            }
            let Some(value) = self.expand(&header_key, value) else {
                continue;
            };
            match HeaderValue::from_str(&value) {
                Ok(mut header_value) => {
                    header_value.set_sensitive(is_secret_header(&header_name));
                    fixed.push((header_name, header_value));
                }
                Err(_) => {
                    self.problem(header_key, "value holds characters not allowed in a header")
                }
            }
        }
        (fixed, per_user)
    }

    /// A header name an upstream request may carry from the configuration.
    fn settable_header(&mut self, key: &str, name: &str) -> Option<HeaderName> {
        let Ok(header_name) = HeaderName::from_str(name) else {
            self.problem(key, "is not a valid HTTP header name");
            return None;
        };
        if RESERVED_HEADERS.contains(&header_name.as_str()) {
            self.problem(key, "is set by the MCP transport and cannot be configured");
            return None;
        }
        Some(header_name)
    }

    /// A value with `${claim:NAME}` in it; the rest is expanded now.
    fn user_header(&mut self, key: &str, value: &str) -> Option<UserHeader> {
        let mut parts = Vec::new();
        let mut rest = value;
        while let Some(at) = rest.find("${claim:") {
            let text = self.expand(key, &rest[..at])?;
            if !text.is_empty() {
                parts.push(Part::Text(text));
            }
            let after = &rest[at + "${claim:".len()..];
            let Some(end) = after.find('}') else {
                self.problem(key, "has an unterminated `${claim:…}`");
                return None;
            };
            let claim = &after[..end];
            if claim.is_empty() {
                self.problem(key, "names no claim in `${claim:}`");
                return None;
            }
            parts.push(Part::Claim(claim.to_owned()));
            rest = &after[end + 1..];
        }
        let text = self.expand(key, rest)?;
        if !text.is_empty() {
            parts.push(Part::Text(text));
        }
        Some(UserHeader { parts })
    }

    /// `forward_headers` and `rename_headers` of the upstream at `key`: (client name, name
    /// upstream). They may not be credentials, the transport's own, or set by `headers`.
    pub(super) fn forward_headers(
        &mut self,
        key: &str,
        raw: &RawUpstream,
        fixed: &[(HeaderName, HeaderValue)],
        per_user: &[(HeaderName, UserHeader)],
    ) -> Vec<(HeaderName, HeaderName)> {
        let plain = raw
            .forward_headers
            .iter()
            .flatten()
            .enumerate()
            .map(|(i, name)| {
                (
                    format!("{key}.forward_headers[{i}]"),
                    name.clone(),
                    name.clone(),
                )
            });
        let renamed: Vec<_> = self
            .string_map(
                &format!("{key}.rename_headers"),
                raw.rename_headers.as_ref(),
            )
            .into_iter()
            .map(|(from, to)| {
                let at = format!("{key}.rename_headers.{}", key_segment(&from));
                (at, from, to)
            })
            .collect();
        let mut rules: Vec<(HeaderName, HeaderName)> = Vec::new();
        for (at, from, to) in plain.collect::<Vec<_>>().into_iter().chain(renamed) {
            let Ok(client) = HeaderName::from_str(&from) else {
                self.problem(at, format!("`{from}` is not a valid HTTP header name"));
                continue;
            };
            if CREDENTIALS.contains(&client.as_str()) {
                self.problem(
                    at,
                    format!(
                        "`{from}` carries the client's credentials and is never passed on; give \
                         the upstream its own with `headers` or `oauth`"
                    ),
                );
                continue;
            }
            let Some(upstream) = self.settable_header(&at, &to) else {
                continue;
            };
            if RESERVED_HEADERS.contains(&client.as_str()) {
                self.problem(&at, format!("`{from}` belongs to the MCP transport"));
                continue;
            }
            let set = fixed
                .iter()
                .map(|(n, _)| n)
                .chain(per_user.iter().map(|(n, _)| n));
            if set.clone().any(|name| *name == upstream) {
                self.problem(&at, format!("`{to}` is already set by `headers`"));
                continue;
            }
            if rules.iter().any(|(_, taken)| *taken == upstream) {
                self.problem(&at, format!("`{to}` is forwarded twice"));
                continue;
            }
            rules.push((client, upstream));
        }
        rules
    }
}

/// Headers whose values must not appear in logs.
fn is_secret_header(name: &HeaderName) -> bool {
    let name = name.as_str();
    CREDENTIALS.contains(&name)
        || name.contains("token")
        || name.contains("key")
        || name.contains("secret")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::principal::Identity;

    #[test]
    fn user_headers_fill_in_claims_or_are_left_out() {
        let header = UserHeader {
            parts: vec![
                Part::Text("user=".into()),
                Part::Claim("sub".into()),
                Part::Text(";level=".into()),
                Part::Claim("level".into()),
            ],
        };
        let alice = Principal::authenticated(
            "jwt:alice",
            Identity {
                subject: "alice".into(),
                claims: json!({"sub": "alice", "level": 3})
                    .as_object()
                    .unwrap()
                    .clone(),
                ..Identity::default()
            },
        );
        assert_eq!(header.render(&alice).unwrap(), "user=alice;level=3");
        let key_user = Principal::authenticated(
            "key:ci",
            Identity {
                subject: "ci".into(),
                ..Identity::default()
            },
        );
        assert!(header.render(&key_user).is_none(), "no level claim");
        let sub_only = UserHeader {
            parts: vec![Part::Claim("sub".into())],
        };
        assert_eq!(sub_only.render(&key_user).unwrap(), "ci");
        assert!(sub_only.render(&Principal::anonymous()).is_none());
        let evil = Principal::authenticated(
            "jwt:x",
            Identity {
                claims: json!({"sub": "a\r\nX-Admin: 1"})
                    .as_object()
                    .unwrap()
                    .clone(),
                ..Identity::default()
            },
        );
        assert!(sub_only.render(&evil).is_none(), "no header injection");
    }
}
