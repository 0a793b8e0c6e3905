//! `[[quota]]`: how much of the upstreams a principal (or everyone a rule names, together)
//! may use — a request rate, a count per day or month, calls at once — for the calls it
//! covers (upstreams, and tools, prompts or resources as `[[policy]]` names them; all calls if
//! it names none). `who` is `[[policy]]`'s.

use std::{sync::Arc, time::Duration};

use serde::Deserialize;

use super::{
    access::{RawItems, RawWho},
    keys::Checker,
};
use crate::policy::{Items, Who};

/// `[[quota]]` as written.
#[derive(Debug, Default, Deserialize)]
pub struct RawQuota {
    pub name: Option<String>,
    pub who: Option<RawWho>,
    pub upstreams: Option<Vec<String>>,
    pub tools: Option<Vec<String>>,
    pub prompts: Option<Vec<String>>,
    pub resources: Option<Vec<String>>,
    pub rate: Option<String>,
    pub daily: Option<u64>,
    pub monthly: Option<u64>,
    pub concurrent: Option<u32>,
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
