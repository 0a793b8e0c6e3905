//! What the gateway does with an upstream's items on their way through, as written and as
//! checked: whether tool arguments are checked against their schemas (`validate_arguments`),
//! whether tool definitions are pinned (`pin`, over `[catalog] pin`), which tool calls and
//! resource reads are cached (`cache`, `tool_cache`), and how arguments are audited
//! (`audit_arguments`), and whether resources that tool results link to are read and inlined
//! for clients that cannot follow links (`inline_resources`, `inline_max_bytes`).

use std::{collections::HashMap, time::Duration};

use schemars::JsonSchema;
use serde::Deserialize;

use super::{
    audit::AuditArguments,
    keys::{Checker, Entries, key_segment},
};

/// The longest a result may be cached.
const MAX_CACHE_SECONDS: f64 = 24.0 * 3600.0;
/// How much of linked resources one tool result may have inlined, by default and at most.
pub const INLINE_BYTES: u64 = 1 << 20;
pub(super) const INLINE_BYTES_MOST: u64 = 16 << 20;

/// `cache = { … }` as written: how long results are kept, and for whom.
#[derive(Debug, Default, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Cache")]
pub struct RawCache {
    /// How long a result is kept. Seconds, above 0 and at most 86400; required.
    #[schemars(required, range(max = MAX_CACHE_SECONDS), extend("exclusiveMinimum" = 0))]
    pub seconds: Option<f64>,
    /// One entry for every caller (results do not depend on who asks) rather than one per
    /// user.
    #[schemars(extend("default" = false))]
    pub shared: Option<bool>,
}

/// How long results are kept, and for whom.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheRule {
    pub ttl: Duration,
    /// One entry for every caller (the result does not depend on who asks); otherwise one
    /// per principal.
    pub shared: bool,
}

/// An upstream's item rules, checked.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ItemRules {
    /// Check tool arguments against the tool's input schema (on unless turned off).
    pub validate_arguments: bool,
    /// Pin tool definitions: `None` follows `[catalog] pin`.
    pub pin: Option<bool>,
    /// Calls of every tool, and every resource read, cached like this.
    pub cache: Option<CacheRule>,
    /// Calls of single tools (by the upstream's name) cached like this, over `cache`.
    pub tool_cache: HashMap<String, CacheRule>,
    /// How its calls' arguments appear in audit records: `None` follows `[audit] arguments`.
    pub audit_arguments: Option<AuditArguments>,
    /// With inlining: how many bytes of linked resources one tool result may have inlined.
    pub inline_resources: Option<u64>,
}

impl ItemRules {
    /// How calls of `tool` (the upstream's name) are cached, if at all.
    pub fn tool_cache(&self, tool: &str) -> Option<CacheRule> {
        self.tool_cache.get(tool).copied().or(self.cache)
    }
}

impl Checker<'_> {
    /// The item rules of the upstream at `key`.
    pub(super) fn item_rules(
        &mut self,
        key: &str,
        validate_arguments: Option<bool>,
        pin: Option<bool>,
        (cache, tool_cache): (Option<&RawCache>, Option<&Entries<RawCache>>),
        audit_arguments: Option<&str>,
        (inline, inline_max): (Option<bool>, Option<u64>),
    ) -> ItemRules {
        let cache = cache.map(|raw| self.cache_rule(&format!("{key}.cache"), raw));
        let mut tools = HashMap::new();
        let tools_key = format!("{key}.tool_cache");
        for dup in tool_cache.iter().flat_map(|t| &t.duplicates) {
            self.problem(
                format!("{tools_key}.{}", key_segment(dup)),
                "is given more than once",
            );
        }
        for (tool, raw) in tool_cache.into_iter().flat_map(Entries::iter) {
            let rule = self.cache_rule(&format!("{tools_key}.{}", key_segment(tool)), raw);
            tools.insert(tool.to_owned(), rule);
        }
        let audit_arguments = audit_arguments
            .and_then(|text| self.audit_arguments(&format!("{key}.audit_arguments"), text));
        let inline_resources = self.inlining(key, inline, inline_max);
        ItemRules {
            validate_arguments: validate_arguments.unwrap_or(true),
            pin,
            cache,
            tool_cache: tools,
            audit_arguments,
            inline_resources,
        }
    }

    /// `inline_resources` and `inline_max_bytes` of the upstream or endpoint at `key`.
    pub(super) fn inlining(
        &mut self,
        key: &str,
        inline: Option<bool>,
        max: Option<u64>,
    ) -> Option<u64> {
        match (inline, max) {
            (Some(true), Some(max)) if max == 0 || max > INLINE_BYTES_MOST => {
                self.problem(
                    format!("{key}.inline_max_bytes"),
                    format!("must be above 0 and at most {INLINE_BYTES_MOST}, not {max}"),
                );
                None
            }
            (Some(true), max) => Some(max.unwrap_or(INLINE_BYTES)),
            (_, Some(_)) => {
                self.problem(
                    format!("{key}.inline_max_bytes"),
                    "applies only with `inline_resources = true`",
                );
                None
            }
            _ => None,
        }
    }

    fn cache_rule(&mut self, key: &str, raw: &RawCache) -> CacheRule {
        let ttl = match raw.seconds {
            Some(s) if s.is_finite() && s > 0.0 && s <= MAX_CACHE_SECONDS => {
                Duration::from_secs_f64(s)
            }
            Some(s) => {
                self.problem(
                    format!("{key}.seconds"),
                    format!("must be a number of seconds above 0 and at most {MAX_CACHE_SECONDS}, not {s}"),
                );
                Duration::from_secs(1)
            }
            None => {
                self.problem(
                    format!("{key}.seconds"),
                    "is required: how long a result is kept",
                );
                Duration::from_secs(1)
            }
        };
        CacheRule {
            ttl,
            shared: raw.shared.unwrap_or(false),
        }
    }
}
