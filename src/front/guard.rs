//! The listeners' guard against DNS rebinding and against web pages of other sites: the `Host`
//! of every request must be one of the allowed hosts (checked before anything else), and a
//! request that carries an `Origin` (only browsers send one) must come from an allowed origin.
//! The MCP listener allows `[server] allowed_hosts` and `allowed_origins`; the admin listener
//! loopback names and `[admin] allowed_hosts`.

use http::{HeaderMap, StatusCode, Uri, header};

use crate::config::AllowedOrigins;

/// The allow-lists, parsed once.
pub struct Guard {
    /// Empty: any host.
    hosts: Vec<Authority>,
    /// `None`: any origin.
    origins: Option<Vec<AllowedOrigin>>,
}

/// A refusal: the status and a text for the client.
pub type Refusal = (StatusCode, &'static str);

#[derive(Debug, PartialEq, Eq)]
struct Authority {
    host: String,
    /// `None` in an allow-list entry: any port.
    port: Option<u16>,
}

#[derive(Debug, PartialEq, Eq)]
enum AllowedOrigin {
    Null,
    Site {
        scheme: String,
        host: String,
        port: AllowedPort,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AllowedPort {
    /// `:*`, or no port given.
    Any,
    Exact(u16),
}

impl Guard {
    /// A guard accepting `hosts` (none: any host) and, from web pages, `origins`.
    pub fn new<'a>(hosts: impl IntoIterator<Item = &'a str>, origins: &AllowedOrigins) -> Self {
        let hosts = hosts.into_iter().filter_map(parse_authority).collect();
        let origins = match origins {
            AllowedOrigins::Any => None,
            AllowedOrigins::Only(origins) => Some(
                origins
                    .iter()
                    .filter_map(|o| parse_allowed_origin(o))
                    .collect(),
            ),
        };
        Self { hosts, origins }
    }

    /// Whether a request with `uri` and `headers` may be served: its host, then its origin.
    pub fn check(&self, uri: &Uri, headers: &HeaderMap) -> Result<(), Refusal> {
        self.check_host(uri, headers)?;
        self.check_origin(headers)
    }

    /// Whether a request with `uri` and `headers` was sent to an allowed host.
    pub fn check_host(&self, uri: &Uri, headers: &HeaderMap) -> Result<(), Refusal> {
        if !self.hosts.is_empty() {
            let (host, port) = match headers.get(header::HOST) {
                Some(host) => host
                    .to_str()
                    .ok()
                    .and_then(split_authority)
                    .ok_or((StatusCode::BAD_REQUEST, "Bad Request: Invalid Host header"))?,
                // HTTP/2 carries the host in `:authority`.
                None => uri
                    .authority()
                    .and_then(|a| split_authority(a.as_str()))
                    .ok_or((StatusCode::BAD_REQUEST, "Bad Request: missing Host header"))?,
            };
            let allowed = self.hosts.iter().any(|allowed| {
                allowed.host.eq_ignore_ascii_case(host)
                    && allowed.port.is_none_or(|p| port == Some(p))
            });
            if !allowed {
                tracing::warn!(%host, "refused a request for a host that is not allowed (possible DNS rebinding)");
                return Err((
                    StatusCode::FORBIDDEN,
                    "Forbidden: Host header is not allowed",
                ));
            }
        }
        Ok(())
    }

    /// Whether a request with `headers` is not from a web page, or from one of an allowed
    /// origin.
    pub fn check_origin(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        let (Some(origins), Some(origin)) = (&self.origins, headers.get(header::ORIGIN)) else {
            return Ok(());
        };
        let origin = origin
            .to_str()
            .ok()
            .and_then(parse_origin)
            .ok_or((StatusCode::FORBIDDEN, "Forbidden: Invalid Origin header"))?;
        if origins.iter().any(|allowed| allowed.matches(&origin)) {
            return Ok(());
        }
        tracing::warn!(
            ?origin,
            "refused a request from a web page of another origin"
        );
        Err((
            StatusCode::FORBIDDEN,
            "Forbidden: Origin header is not allowed",
        ))
    }
}

/// An origin as a browser sends it.
#[derive(Debug, PartialEq, Eq)]
enum Origin {
    Null,
    Site {
        scheme: String,
        host: String,
        port: Option<u16>,
    },
}

impl AllowedOrigin {
    fn matches(&self, origin: &Origin) -> bool {
        match (self, origin) {
            (AllowedOrigin::Null, Origin::Null) => true,
            (
                AllowedOrigin::Site { scheme, host, port },
                Origin::Site {
                    scheme: o_scheme,
                    host: o_host,
                    port: o_port,
                },
            ) => {
                scheme == o_scheme
                    && host == o_host
                    && match port {
                        AllowedPort::Any => true,
                        AllowedPort::Exact(port) => {
                            o_port.or_else(|| default_port(o_scheme)) == Some(*port)
                        }
                    }
            }
            _ => false,
        }
    }
}

fn parse_authority(text: &str) -> Option<Authority> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    match http::uri::Authority::try_from(text) {
        Ok(authority) => Some(Authority {
            host: normalize_host(authority.host()),
            port: authority.port_u16(),
        }),
        Err(_) => Some(Authority {
            host: normalize_host(text),
            port: None,
        }),
    }
}

/// A request's `Host` as host (without IPv6 brackets) and port, without copying it.
fn split_authority(text: &str) -> Option<(&str, Option<u16>)> {
    let text = text.trim_ascii();
    let (host, port) = match text.strip_prefix('[') {
        Some(bracketed) => {
            let (host, rest) = bracketed.split_once(']')?;
            (host, rest.strip_prefix(':'))
        }
        None => match text.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        },
    };
    // Bytes, not chars: a byte of a character beyond ASCII is not valid either.
    let valid = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-' | b'_' | b':' | b'%');
    if host.is_empty() || !host.bytes().all(valid) {
        return None;
    }
    let port = match port {
        Some(port) => Some(port.parse().ok()?),
        None => None,
    };
    Some((host, port))
}

fn normalize_host(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase()
}

fn parse_origin(text: &str) -> Option<Origin> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("null") {
        return Some(Origin::Null);
    }
    let uri = Uri::try_from(text).ok()?;
    let authority = uri.authority()?;
    Some(Origin::Site {
        scheme: uri.scheme_str()?.to_ascii_lowercase(),
        host: normalize_host(authority.host()),
        port: authority.port_u16(),
    })
}

fn parse_allowed_origin(text: &str) -> Option<AllowedOrigin> {
    let text = text.trim();
    let (base, any_port) = match text.strip_suffix(":*") {
        Some(base) => (base, true),
        None => (text, false),
    };
    Some(match parse_origin(base)? {
        Origin::Null => AllowedOrigin::Null,
        Origin::Site { scheme, host, port } => AllowedOrigin::Site {
            scheme,
            host,
            port: match (any_port, port) {
                (false, Some(port)) => AllowedPort::Exact(port),
                _ => AllowedPort::Any,
            },
        },
    })
}

/// The port an origin implies when it names none (RFC 6454).
fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn guard(hosts: &[&str], origins: Option<&[&str]>) -> Guard {
        Guard {
            hosts: hosts.iter().filter_map(|h| parse_authority(h)).collect(),
            origins: origins.map(|list| {
                list.iter()
                    .filter_map(|o| parse_allowed_origin(o))
                    .collect()
            }),
        }
    }

    fn check(guard: &Guard, host: Option<&str>, origin: Option<&str>) -> Result<(), StatusCode> {
        let mut headers = HeaderMap::new();
        if let Some(host) = host {
            headers.insert(header::HOST, HeaderValue::from_str(host).unwrap());
        }
        if let Some(origin) = origin {
            headers.insert(header::ORIGIN, HeaderValue::from_str(origin).unwrap());
        }
        guard
            .check(&Uri::from_static("/mcp"), &headers)
            .map_err(|(status, _)| status)
    }

    #[test]
    fn hosts_match_by_name_and_optional_port() {
        let guard = guard(&["localhost", "127.0.0.1:8080", "::1"], None);
        assert!(check(&guard, Some("LOCALHOST:1234"), None).is_ok());
        assert!(check(&guard, Some("127.0.0.1:8080"), None).is_ok());
        assert!(check(&guard, Some("[::1]:9"), None).is_ok());
        assert_eq!(
            check(&guard, Some("127.0.0.1:9"), None),
            Err(StatusCode::FORBIDDEN)
        );
        assert_eq!(
            check(&guard, Some("attacker.example"), None),
            Err(StatusCode::FORBIDDEN)
        );
        assert_eq!(check(&guard, None, None), Err(StatusCode::BAD_REQUEST));
        assert!(check(&self::guard(&[], None), Some("anything"), None).is_ok());
    }

    #[test]
    fn origins_match_scheme_host_and_port() {
        let guard = guard(
            &[],
            Some(&[
                "http://localhost:*",
                "https://app.example",
                "http://a.example:8080",
                "null",
            ]),
        );
        assert!(check(&guard, None, Some("http://localhost:6274")).is_ok());
        assert!(check(&guard, None, Some("https://app.example")).is_ok());
        assert!(check(&guard, None, Some("http://a.example:8080")).is_ok());
        assert!(check(&guard, None, Some("null")).is_ok());
        assert!(check(&guard, None, None).is_ok(), "not a web page");
        for refused in [
            "https://localhost:1",
            "http://a.example",
            "https://attacker.example",
            "::",
        ] {
            assert_eq!(
                check(&guard, None, Some(refused)),
                Err(StatusCode::FORBIDDEN),
                "{refused}"
            );
        }
    }
}
