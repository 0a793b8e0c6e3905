//! `[[quota]]`: how much of the upstreams a principal (or everyone a rule names, together)
//! may use — a request rate, a count per day or month, calls at once — for the calls it
//! covers (upstreams, and tools, prompts or resources as `[[policy]]` names them; all calls if
//! it names none). `who` is `[[policy]]`'s.

use std::{sync::Arc, time::Duration};

use schemars::JsonSchema;
use serde::Deserialize;

use super::{
    access::{RawItems, RawWho},
    keys::Checker,
};
use crate::policy::{Items, Who};

/// `[[quota]]` as written: one quota; it sets at least one of `rate`, `daily`, `monthly`
/// and `concurrent`. It covers the calls it names (globs as in `[[policy]]`), all if none.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "Quota")]
pub struct RawQuota {
    /// Names its counters, metrics and refusals: up to 64 letters, digits, `-`, `_` or `.`.
    /// Required, one per quota.
    #[schemars(required, extend("pattern" = "^[A-Za-z0-9._-]{1,64}$"))]
    pub name: Option<String>,
    /// The users it applies to, as in `[[policy]]`. Default: everyone.
    pub who: Option<RawWho>,
    /// The upstreams whose calls it counts.
    pub upstreams: Option<Vec<String>>,
    /// The tools whose calls it counts, as `UPSTREAM:TOOL`.
    pub tools: Option<Vec<String>>,
    /// The prompts whose calls it counts, as `UPSTREAM:PROMPT`.
    pub prompts: Option<Vec<String>>,
    /// The resources whose reads it counts, as `UPSTREAM:URI`.
    pub resources: Option<Vec<String>>,
    /// At most N calls per unit, evenly refilled: `N/second`, `N/minute`, `N/hour`, `N/day`
    /// (also `s`, `min`/`m`, `h`, `d`).
    #[schemars(extend("pattern" = "^\\s*[0-9]+\\s*/\\s*(second|s|minute|min|m|hour|h|day|d)\\s*$"))]
    pub rate: Option<String>,
    /// At most this many calls a day (UTC). Calls.
    #[schemars(range(min = 1))]
    pub daily: Option<u64>,
    /// At most this many calls a calendar month (UTC). Calls.
    #[schemars(range(min = 1))]
    pub monthly: Option<u64>,
    /// At most this many calls in flight at once. Calls.
    #[schemars(range(min = 1))]
    pub concurrent: Option<u32>,
    /// `principal`: a count for each user; `everyone`: one count for all it applies to.
    #[schemars(extend("enum" = ["principal", "everyone"], "default" = "principal"))]
    pub per: Option<String>,
}

/// One `[[quota]]`, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct QuotaRule {
    /// Names its counters, its metrics and its refusals.
    pub name: Arc<str>,
    pub who: Who,
    /// The calls it counts.
    pub covers: Items,
    /// At most `.0` calls per `.1`, evenly refilled.
    pub rate: Option<(u32, Duration)>,
    pub daily: Option<u64>,
    pub monthly: Option<u64>,
    pub concurrent: Option<u32>,
    /// One count for everyone it names, rather than one per principal.
    pub shared: bool,
}

impl Checker<'_> {
    pub(super) fn quotas(&mut self, raw: Option<&[RawQuota]>) -> Vec<QuotaRule> {
        let mut rules: Vec<QuotaRule> = Vec::new();
        for (i, raw) in raw.unwrap_or_default().iter().enumerate() {
            let key = format!("quota[{i}]");
            let Some(name) = raw.name.as_deref().filter(|name| valid_name(name)) else {
                self.problem(
                    format!("{key}.name"),
                    "is needed: letters, digits, `-`, `_` or `.` (it names the quota's metrics and refusals)",
                );
                continue;
            };
            if rules.iter().any(|rule| &*rule.name == name) {
                self.problem(format!("{key}.name"), format!("`{name}` names two quotas"));
            }
            let rate = raw
                .rate
                .as_deref()
                .and_then(|text| self.rate(&format!("{key}.rate"), text));
            for (field, value) in [("daily", raw.daily), ("monthly", raw.monthly)] {
                if value == Some(0) {
                    self.problem(format!("{key}.{field}"), "must be at least 1");
                }
            }
            if raw.concurrent == Some(0) {
                self.problem(format!("{key}.concurrent"), "must be at least 1");
            }
            if rate.is_none()
                && raw.daily.is_none()
                && raw.monthly.is_none()
                && raw.concurrent.is_none()
            {
                self.problem(
                    &key,
                    "sets no limit: give `rate` (e.g. \"30/minute\"), `daily`, `monthly` or `concurrent`",
                );
            }
            let shared = match raw.per.as_deref() {
                None | Some("principal") => false,
                Some("everyone") => true,
                Some(other) => {
                    self.problem(
                        format!("{key}.per"),
                        format!("`{other}` is not `principal` (a count for each) or `everyone` (one count for all it names)"),
                    );
                    false
                }
            };
            let items = RawItems {
                upstreams: raw.upstreams.clone(),
                tools: raw.tools.clone(),
                prompts: raw.prompts.clone(),
                resources: raw.resources.clone(),
            };
            rules.push(QuotaRule {
                name: Arc::from(name),
                who: self.who(&format!("{key}.who"), raw.who.as_ref()),
                covers: self.items(&key, Some(&items)),
                rate,
                daily: raw.daily,
                monthly: raw.monthly,
                concurrent: raw.concurrent,
                shared,
            });
        }
        rules
    }

    /// `N/second`, `N/minute`, `N/hour` or `N/day`.
    fn rate(&mut self, key: &str, text: &str) -> Option<(u32, Duration)> {
        let parsed = text.split_once('/').and_then(|(count, unit)| {
            let count: u32 = count.trim().parse().ok().filter(|n| *n > 0)?;
            let seconds = match unit.trim() {
                "second" | "s" => 1,
                "minute" | "min" | "m" => 60,
                "hour" | "h" => 3600,
                "day" | "d" => 86_400,
                _ => return None,
            };
            Some((count, Duration::from_secs(seconds)))
        });
        if parsed.is_none() {
            self.problem(
                key,
                format!(
                    "`{text}` is not a rate: N/second, N/minute, N/hour or N/day, N at least 1"
                ),
            );
        }
        parsed
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}
