//! `[[guardrail]]`: secrets and personal data looked for in tool results or call arguments,
//! and what is done when some is found; or a policy hook (an HTTP service) asked about each
//! call; as written and as checked (`guardrail::Guardrail` is what the runtime uses). A
//! guardrail has detectors (`detect`, `action`, `screen`) or a `hook`, never both.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use super::{
    keys::{Checker, Entries},
    kinds::{Expanded, Seconds},
};
use crate::guardrail::{
    Action, Check, Detector, Guardrail, Screen,
    hook::{Failure, Hook},
};

/// How long a hook has to answer, by default.
const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(1);

/// `[[guardrail]]` as written.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "Guardrail")]
pub struct RawGuardrail {
    /// Its name, in the audit log, the metrics and the results it withholds. Default:
    /// `guardrail[N]`.
    pub name: Option<String>,
    /// Upstreams whose tool calls it looks at.
    pub upstreams: Option<Vec<String>>,
    /// Tools whose calls it looks at, as `UPSTREAM:TOOL` (the upstream's own name). Default,
    /// with `upstreams` left out too: every tool's.
    pub tools: Option<Vec<String>>,
    /// What it looks for: `secrets` (`aws_access_key`, `github_token`, `google_api_key`,
    /// `slack_token`, `stripe_key`, `private_key`, `jwt`, `generic_secret`), `personal`
    /// (`email`, `card_number`, `iban`, `phone`), or any of those by name. Needed, unless it has
    /// a `hook`.
    pub detect: Option<Vec<String>>,
    /// `redact` (each finding replaced by `[REDACTED:KIND]`), `block` (the result withheld, or
    /// the call refused: the tool's failure naming the kinds found), or `flag` (passed on, and
    /// audited).
    #[schemars(extend("enum" = ["redact", "block", "flag"], "default" = "redact"))]
    pub action: Option<String>,
    /// What its detectors screen: `results` (what tools answer), `arguments` (what calls send,
    /// before they are sent), or both.
    #[schemars(extend("items" = {"enum": ["results", "arguments"]}, "default" = ["results"]))]
    pub screen: Option<Vec<String>>,
    /// A policy service asked about each call it covers, instead of detectors.
    pub hook: Option<RawHook>,
}

/// `hook = { … }` as written.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "GuardrailHook")]
pub struct RawHook {
    /// Where the questions are POSTed (JSON), `http(s)://`.
    #[schemars(with = "Option<Expanded>")]
    pub url: Option<String>,
    /// How long the hook has to answer (answer read included) before it has failed. Seconds.
    #[schemars(with = "Option<Seconds>", extend("default" = DEFAULT_HOOK_TIMEOUT.as_secs()))]
    pub timeout_seconds: Option<f64>,
    /// When the hook has failed (no answer in time, an answer other than 2xx, one that cannot
    /// be read or is over 1 MiB, no connection): `closed` refuses the call, `open` lets it
    /// through (and logs a warning).
    #[schemars(extend("enum" = ["closed", "open"], "default" = "closed"))]
    pub failure: Option<String>,
    /// Whether it is asked before a call is sent (about its arguments).
    #[schemars(extend("default" = true))]
    pub before: Option<bool>,
    /// Whether it is asked about a call's result.
    #[schemars(extend("default" = false))]
    pub after: Option<bool>,
    /// Headers sent with every question (a token, say; kept out of logs).
    #[schemars(with = "Option<Entries<Expanded>>")]
    pub headers: Option<Entries<String>>,
}

impl Checker<'_> {
    pub(super) fn guardrails(&mut self, raw: Option<&[RawGuardrail]>) -> Vec<Guardrail> {
        let mut out = Vec::new();
        for (i, raw) in raw.unwrap_or_default().iter().enumerate() {
            let key = format!("guardrail[{i}]");
            let calls = self.calls(&key, raw.upstreams.as_ref(), raw.tools.as_ref());
            let check = match &raw.hook {
                Some(hook) => {
                    for (given, field) in [
                        (raw.detect.is_some(), "detect"),
                        (raw.action.is_some(), "action"),
                        (raw.screen.is_some(), "screen"),
                    ] {
                        if given {
                            self.problem(
                                format!("{key}.{field}"),
                                "is for detectors: a guardrail has detectors or a `hook`, not both",
                            );
                        }
                    }
                    match self.hook(&format!("{key}.hook"), hook) {
                        Some(hook) => Check::Hook(hook),
                        // Its problem is recorded: the configuration is not loaded.
                        None => continue,
                    }
                }
                None => self.detectors(&key, raw),
            };
            out.push(Guardrail {
                name: raw.name.clone().unwrap_or_else(|| key.clone()),
                calls,
                check,
            });
        }
        out
    }

    /// The detectors of the guardrail at `key`, what they do and what they screen.
    fn detectors(&mut self, key: &str, raw: &RawGuardrail) -> Check {
        let at = |field: &str| format!("{key}.{field}");
        let mut detectors: Vec<Detector> = Vec::new();
        for name in raw.detect.iter().flatten() {
            match Detector::named(name) {
                Some(named) => detectors.extend(named),
                None => self.problem(
                    at("detect"),
                    format!(
                        "`{name}` is not a detector: `secrets`, `personal`, or one of {}",
                        crate::guardrail::ALL
                            .iter()
                            .map(|d| format!("`{}`", d.name()))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ),
            }
        }
        detectors.sort();
        detectors.dedup();
        if raw.detect.is_none() {
            self.problem(
                at("detect"),
                "is needed: what the guardrail looks for (or a `hook` to ask)",
            );
        }
        let action = match raw.action.as_deref() {
            None | Some("redact") => Action::Redact,
            Some("block") => Action::Block,
            Some("flag") => Action::Flag,
            Some(other) => {
                self.problem(
                    at("action"),
                    format!("`{other}` is not one of `redact`, `block`, `flag`"),
                );
                Action::Redact
            }
        };
        let screen = self.screen(&at("screen"), raw.screen.as_deref());
        Check::Detect {
            detectors,
            action,
            screen,
        }
    }

    /// `screen = [...]` at `key`: `results` when left out.
    fn screen(&mut self, key: &str, raw: Option<&[String]>) -> Screen {
        let Some(raw) = raw else {
            return Screen {
                arguments: false,
                results: true,
            };
        };
        let mut screen = Screen {
            arguments: false,
            results: false,
        };
        for (i, what) in raw.iter().enumerate() {
            match what.as_str() {
                "results" => screen.results = true,
                "arguments" => screen.arguments = true,
                other => self.problem(
                    format!("{key}[{i}]"),
                    format!("`{other}` is not one of `results`, `arguments`"),
                ),
            }
        }
        if raw.is_empty() {
            self.problem(key, "names nothing: `results`, `arguments`, or both");
        }
        screen
    }

    /// `hook = { … }` at `key`; `None` without a URL (a problem then).
    fn hook(&mut self, key: &str, raw: &RawHook) -> Option<Hook> {
        let at = |field: &str| format!("{key}.{field}");
        let url = match &raw.url {
            Some(text) => self.url(&at("url"), text),
            None => {
                self.problem(at("url"), "is needed: where the hook is asked");
                None
            }
        };
        let failure = match raw.failure.as_deref() {
            None | Some("closed") => Failure::Closed,
            Some("open") => Failure::Open,
            Some(other) => {
                self.problem(
                    at("failure"),
                    format!("`{other}` is not one of `closed`, `open`"),
                );
                Failure::Closed
            }
        };
        let (before, after) = (raw.before.unwrap_or(true), raw.after.unwrap_or(false));
        if !before && !after {
            self.problem(key, "is never asked: `before` and `after` are both false");
        }
        let (headers, per_user) = self.headers(&at("headers"), raw.headers.as_ref());
        if !per_user.is_empty() {
            self.problem(
                at("headers"),
                "cannot name the user's claims (`${claim:…}`): the question names the user",
            );
        }
        let timeout = self.seconds(
            &at("timeout_seconds"),
            raw.timeout_seconds,
            DEFAULT_HOOK_TIMEOUT,
        );
        Some(Hook {
            url: url?,
            timeout,
            failure,
            before,
            after,
            headers,
        })
    }
}
