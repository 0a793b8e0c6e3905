//! `[server.cors]` and `[endpoints.NAME.cors]`: how web pages of allowed origins may call an
//! endpoint — which methods and request headers a preflight allows, which answer headers the
//! page may read beyond those an MCP client needs, and how long a preflight is kept — and, on
//! a virtual endpoint, which of the allowed origins it serves. Credentials (cookies, TLS
//! client certificates) are never allowed: MCP clients authenticate with `Authorization`,
//! which a page sends itself, and a cookie the browser adds by itself must not be a way in.

use schemars::JsonSchema;
use serde::Deserialize;

use super::{AllowedOrigins, keys::Checker};

/// The methods of the MCP endpoint.
const METHODS: [&str; 4] = ["GET", "POST", "DELETE", "OPTIONS"];
/// What a page may send when neither it nor the configuration names more.
pub const REQUEST_HEADERS: &str =
    "Accept, Authorization, Content-Type, Last-Event-ID, Mcp-Protocol-Version, Mcp-Session-Id";
/// What an MCP client in a page must read: always exposed.
const EXPOSED: &str = "Mcp-Session-Id, Mcp-Protocol-Version, WWW-Authenticate";
const DEFAULT_MAX_AGE: u64 = 600;
/// Browsers keep a preflight at most this long anyway.
const MAX_MAX_AGE: u64 = 86_400;

/// A `cors` table: how web pages of allowed origins may call an endpoint. Credentials are
/// never allowed (pages send `Authorization` themselves).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "Cors")]
pub struct RawCors {
    /// The methods a preflight allows; must hold `POST`.
    #[schemars(
        extend("items" = { "type": "string", "enum": METHODS }, "default" = METHODS, "contains" = { "const": "POST" })
    )]
    pub allowed_methods: Option<Vec<String>>,
    /// The request headers a preflight allows. Default: those the preflight asks for.
    pub allowed_headers: Option<Vec<String>>,
    /// Answer headers a page may read, beyond `Mcp-Session-Id`, `Mcp-Protocol-Version` and
    /// `WWW-Authenticate` (always exposed).
    #[schemars(extend("default" = []))]
    pub exposed_headers: Option<Vec<String>>,
    /// How long a browser keeps a preflight's answer. Seconds, at most 86400.
    #[schemars(range(max = MAX_MAX_AGE), extend("default" = DEFAULT_MAX_AGE))]
    pub max_age_seconds: Option<u64>,
    /// On `[endpoints.NAME.cors]` only: the origins this endpoint serves, among
    /// `[server] allowed_origins`. Default: all of them.
    pub allowed_origins: Option<Vec<String>>,
}

/// `[server.cors]`: a `cors` table without `allowed_origins` (the main endpoint's origins are
/// `[server] allowed_origins`), as the schema describes it.
pub(super) struct MainCors;

impl JsonSchema for MainCors {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "MainCors".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut schema = RawCors::json_schema(generator);
        if let Some(properties) = schema
            .get_mut("properties")
            .and_then(serde_json::Value::as_object_mut)
        {
            properties.remove("allowed_origins");
        }
        schema
    }
}

/// An endpoint's CORS policy, with its header values written once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cors {
    /// The methods pages may use (`Access-Control-Allow-Methods`).
    pub methods: Vec<&'static str>,
    /// `Access-Control-Allow-Headers`; `None`: the headers the preflight asks for.
    pub headers: Option<String>,
    /// `Access-Control-Expose-Headers`.
    pub exposed: String,
    /// `Access-Control-Max-Age`.
    pub max_age: String,
    /// On a virtual endpoint: the origins it serves, among `[server] allowed_origins`.
    pub origins: Option<AllowedOrigins>,
}

impl Default for Cors {
    fn default() -> Self {
        Self {
            methods: METHODS.to_vec(),
            headers: None,
            exposed: EXPOSED.into(),
            max_age: DEFAULT_MAX_AGE.to_string(),
            origins: None,
        }
    }
}

impl Checker<'_> {
    /// The `cors` table at `key`; `origins_here`: whether it may narrow the origins (virtual
    /// endpoints; the main one takes `[server] allowed_origins`).
    pub(super) fn cors(&mut self, key: &str, raw: &RawCors, origins_here: bool) -> Cors {
        let mut cors = Cors::default();
        if let Some(methods) = &raw.allowed_methods {
            let mut chosen: Vec<&str> = Vec::new();
            for (i, method) in methods.iter().enumerate() {
                match METHODS.iter().find(|m| m.eq_ignore_ascii_case(method)) {
                    Some(known) if !chosen.contains(known) => chosen.push(known),
                    Some(_) => {}
                    None => self.problem(
                        format!("{key}.allowed_methods[{i}]"),
                        format!("`{method}` is not a method of the endpoint (GET, POST, DELETE, OPTIONS)"),
                    ),
                }
            }
            if !chosen.contains(&"POST") {
                self.problem(
                    format!("{key}.allowed_methods"),
                    "must hold POST: every MCP message is posted",
                );
            }
            cors.methods = chosen;
        }
        if let Some(headers) = &raw.allowed_headers {
            cors.headers = Some(self.header_names(&format!("{key}.allowed_headers"), headers));
        }
        if let Some(exposed) = &raw.exposed_headers {
            let more = self.header_names(&format!("{key}.exposed_headers"), exposed);
            if !more.is_empty() {
                cors.exposed = format!("{EXPOSED}, {more}");
            }
        }
        if let Some(age) = raw.max_age_seconds {
            if age > MAX_MAX_AGE {
                self.problem(
                    format!("{key}.max_age_seconds"),
                    format!("must be at most {MAX_MAX_AGE} (browsers keep a preflight no longer)"),
                );
            }
            cors.max_age = age.min(MAX_MAX_AGE).to_string();
        }
        if let Some(origins) = &raw.allowed_origins {
            let origins_key = format!("{key}.allowed_origins");
            if origins_here {
                cors.origins = Some(self.origins(&origins_key, Some(origins), &[]));
            } else {
                self.problem(
                    origins_key,
                    "the main endpoint's origins are `[server] allowed_origins`",
                );
            }
        }
        cors
    }

    /// `names`, checked as header names, written as a header value.
    fn header_names(&mut self, key: &str, names: &[String]) -> String {
        for (i, name) in names.iter().enumerate() {
            if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                self.problem(
                    format!("{key}[{i}]"),
                    format!("`{name}` is not a header name"),
                );
            }
        }
        names.join(", ")
    }
}
