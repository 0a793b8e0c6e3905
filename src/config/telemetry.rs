//! `[telemetry]`: OpenTelemetry traces, as written and as checked — the OTLP/HTTP collector
//! they are sent to (off unless one is named), the headers it asks for (an API key: kept out
//! of logs), what share of the requests that come without a sampling decision are traced, and
//! the service name spans carry. Read at start; a reload that changes it says a restart is
//! needed.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;
use url::Url;

use super::{keys::Checker, kinds::Expanded};

/// The path of the OTLP/HTTP traces signal, added to an endpoint given without one.
const TRACES_PATH: &str = "/v1/traces";
const DEFAULT_SERVICE_NAME: &str = "switchyard";

/// `[telemetry]` as written. Read at start: changes take a restart.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "Telemetry")]
pub struct RawTelemetry {
    /// The OTLP/HTTP collector spans are sent to (protobuf), `http(s)://`; `/v1/traces` is
    /// added to a URL without a path. Default: no traces.
    #[schemars(with = "Option<Expanded>")]
    pub otlp_endpoint: Option<String>,
    /// The share of requests traced, of those whose client sent no sampling decision. A ratio,
    /// 0 to 1.
    #[schemars(range(min = 0.0, max = 1.0), extend("default" = 1.0))]
    pub sampling_ratio: Option<f64>,
    /// The service name spans carry.
    #[schemars(extend("default" = DEFAULT_SERVICE_NAME))]
    pub service_name: Option<String>,
    /// Headers sent with every export (an API key; kept out of logs).
    #[schemars(with = "Option<BTreeMap<String, Expanded>>")]
    pub headers: Option<BTreeMap<String, String>>,
}

/// `[telemetry]`, checked.
#[derive(Clone, PartialEq)]
pub struct TelemetrySettings {
    /// Where spans are sent (OTLP/HTTP, protobuf); `None`: no traces (the default).
    pub traces_url: Option<Url>,
    /// The share of requests traced, of those whose client sent no sampling decision (a
    /// client's `traceparent` decides for its own requests).
    pub sampling_ratio: f64,
    pub service_name: String,
    /// Sent with every export (values may be secrets).
    pub headers: Vec<(http::HeaderName, http::HeaderValue)>,
}

impl Default for TelemetrySettings {
    fn default() -> Self {
        Self {
            traces_url: None,
            sampling_ratio: 1.0,
            service_name: DEFAULT_SERVICE_NAME.to_owned(),
            headers: Vec::new(),
        }
    }
}

impl std::fmt::Debug for TelemetrySettings {
    /// The headers' values stay out of logs: only their names.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("TelemetrySettings")
            .field("traces_url", &self.traces_url.as_ref().map(Url::as_str))
            .field("sampling_ratio", &self.sampling_ratio)
            .field("service_name", &self.service_name)
            .field("headers", &names)
            .finish()
    }
}

impl Checker<'_> {
    pub(super) fn telemetry(&mut self, raw: Option<&RawTelemetry>) -> TelemetrySettings {
        let Some(raw) = raw else {
            return TelemetrySettings::default();
        };
        let mut settings = TelemetrySettings::default();
        if let Some(ratio) = raw.sampling_ratio {
            if (0.0..=1.0).contains(&ratio) {
                settings.sampling_ratio = ratio;
            } else {
                self.problem(
                    "telemetry.sampling_ratio",
                    "must be between 0 and 1 (0.01 traces one request in a hundred)",
                );
            }
        }
        if let Some(name) = &raw.service_name {
            if name.trim().is_empty() {
                self.problem("telemetry.service_name", "must not be empty");
            } else {
                settings.service_name = name.clone();
            }
        }
        for (name, value) in raw.headers.iter().flatten() {
            let key = format!("telemetry.headers.{name}");
            let Ok(header) = http::HeaderName::try_from(name.as_str()) else {
                self.problem(&key, "is not a valid HTTP header name");
                continue;
            };
            let Some(value) = self.expand(&key, value) else {
                continue;
            };
            match http::HeaderValue::try_from(value) {
                Ok(mut value) => {
                    value.set_sensitive(true);
                    settings.headers.push((header, value));
                }
                Err(_) => self.problem(&key, "is not a valid HTTP header value"),
            }
        }
        let Some(endpoint) = &raw.otlp_endpoint else {
            if !settings.headers.is_empty() || raw.sampling_ratio.is_some() {
                self.problem(
                    "telemetry.otlp_endpoint",
                    "is needed: traces are sent to an OTLP/HTTP collector (e.g. \"http://127.0.0.1:4318\")",
                );
            }
            return settings;
        };
        settings.traces_url = self
            .url("telemetry.otlp_endpoint", endpoint)
            .map(|mut url| {
                if matches!(url.path(), "" | "/") {
                    url.set_path(TRACES_PATH);
                }
                url
            });
        settings
    }
}
