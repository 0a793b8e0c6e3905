//! `[[guardrail]]`: secrets and personal data looked for in tool results, and what is done
//! with a result that holds some, as written and as checked (`guardrail::Guardrail` is what
//! the runtime uses).

use schemars::JsonSchema;
use serde::Deserialize;

use super::keys::Checker;
use crate::guardrail::{Action, Detector, Guardrail};

/// `[[guardrail]]` as written.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "Guardrail")]
pub struct RawGuardrail {
    /// Its name, in the audit log and the results it withholds. Default: `guardrail[N]`.
    pub name: Option<String>,
    /// Upstreams whose tool results it screens.
    pub upstreams: Option<Vec<String>>,
    /// Tools whose results it screens, as `UPSTREAM:TOOL` (the upstream's own name). Default,
    /// with `upstreams` left out too: every tool's.
    pub tools: Option<Vec<String>>,
    /// What it looks for: `secrets` (`aws_access_key`, `github_token`, `google_api_key`,
    /// `slack_token`, `stripe_key`, `private_key`, `jwt`, `generic_secret`), `personal`
    /// (`email`, `card_number`, `iban`, `phone`), or any of those by name.
    pub detect: Option<Vec<String>>,
    /// `redact` (each finding replaced by `[REDACTED:KIND]`), `block` (the result withheld,
    /// the tool's failure naming the kinds found), or `flag` (passed on, and audited).
    #[schemars(extend("enum" = ["redact", "block", "flag"], "default" = "redact"))]
    pub action: Option<String>,
}

impl Checker<'_> {
    pub(super) fn guardrails(&mut self, raw: Option<&[RawGuardrail]>) -> Vec<Guardrail> {
        let mut out = Vec::new();
        for (i, raw) in raw.unwrap_or_default().iter().enumerate() {
            let key = format!("guardrail[{i}]");
            let at = |field: &str| format!("{key}.{field}");
            let calls = self.calls(&key, raw.upstreams.as_ref(), raw.tools.as_ref());
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
                self.problem(at("detect"), "is needed: what the guardrail looks for");
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
            out.push(Guardrail {
                name: raw.name.clone().unwrap_or_else(|| key.clone()),
                calls,
                detectors,
                action,
            });
        }
        out
    }
}
