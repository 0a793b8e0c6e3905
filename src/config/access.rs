//! Checking `[[policy]]` (who may see which upstreams, tools, prompts and resources) and
//! `[endpoints.NAME]` (more endpoint paths, each serving a subset, with tools renamed or
//! described anew). See `policy` for what they mean at run time.

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::Deserialize;

use super::keys::{Checker, Entries, is_reserved_path, key_segment};
use crate::policy::{
    Calls, EndpointSettings, Gate, Glob, ItemPattern, Items, Rule, ToolShape, Who,
};

/// Longest tool name an endpoint may give (as MCP clients accept them).
const MAX_TOOL_NAME_LEN: usize = 128;

/// `[[policy]]` as written: one rule; it needs `allow`, `deny` or `approval`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "PolicyRule")]
pub struct RawRule {
    /// The rule's name, in logs and the status page. Default: `policy[N]`.
    pub name: Option<String>,
    /// The users the rule applies to. Default: everyone.
    pub who: Option<RawWho>,
    /// What the rule lets its users see; where applying rules list what they allow of a
    /// kind, only that is visible.
    pub allow: Option<RawItems>,
    /// What the rule hides from its users; denied wins over allowed.
    pub deny: Option<RawItems>,
    /// The tool calls of its users that wait for a person's approval before they run.
    pub approval: Option<super::approval::RawApproval>,
}

/// `who = { … }` as written: users matching every condition given, each a list of
/// alternatives.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "Who")]
pub struct RawWho {
    /// Globs over principals: `user:jwt:SUB`, `user:key:NAME`, `anonymous`.
    pub principals: Option<Vec<String>>,
    /// Groups, one of which the user must be in.
    pub groups: Option<Vec<String>>,
    /// Scopes, one of which the user's token must carry.
    pub scopes: Option<Vec<String>>,
    /// Token claims and their wanted value (or values, one of which must match).
    pub claims: Option<Entries<OneOrMany>>,
}

/// A claim's wanted value, or its alternatives.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

/// `allow = { … }` / `deny = { … }` as written: globs over names (all of a kind if left out).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "Items")]
pub struct RawItems {
    /// Upstreams by name.
    pub upstreams: Option<Vec<String>>,
    /// Tools as `UPSTREAM:TOOL`, the upstream's own tool name.
    pub tools: Option<Vec<String>>,
    /// Prompts as `UPSTREAM:PROMPT`.
    pub prompts: Option<Vec<String>>,
    /// Resources as `UPSTREAM:URI` (scheme and host in lowercase).
    pub resources: Option<Vec<String>>,
}

/// `[endpoints.NAME]` as written: another endpoint path serving a part of the catalog; NAME
/// holds letters, digits, `-` and `_`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "Endpoint")]
pub struct RawEndpoint {
    /// The endpoint's path, not the main one or Switchyard's own. Default:
    /// `/profiles/NAME/mcp`.
    #[schemars(extend("pattern" = "^/[^?#]*$"))]
    pub path: Option<String>,
    /// The upstreams it serves (globs), as `allow.upstreams` (give one of the two).
    pub upstreams: Option<Vec<String>>,
    /// As `[catalog] prefix_mode`, for this endpoint. Default: `[catalog]`'s.
    #[schemars(extend("enum" = ["always", "conditional", "never"]))]
    pub prefix_mode: Option<String>,
    /// What it serves, as a `[[policy]]` rule's `allow`; the caller's own rules apply too.
    pub allow: Option<RawItems>,
    /// What it hides, as a `[[policy]]` rule's `deny`.
    pub deny: Option<RawItems>,
    /// Tools renamed or described anew, by `"UPSTREAM:TOOL"`.
    pub tools: Option<Entries<RawToolShape>>,
    /// As `[catalog] tool_search`, for this endpoint. Default: `[catalog]`'s.
    #[schemars(extend("enum" = ["off", "on", "auto"]))]
    pub tool_search: Option<String>,
    /// As an upstream's `inline_resources`, for every call through this endpoint.
    #[schemars(extend("default" = false))]
    pub inline_resources: Option<bool>,
    /// With `inline_resources = true`: how much of linked resources one tool result may have
    /// inlined. Bytes, at most 16 MiB.
    #[schemars(
        range(min = 1, max = super::items::INLINE_BYTES_MOST),
        extend("default" = super::INLINE_BYTES)
    )]
    pub inline_max_bytes: Option<u64>,
    /// How web pages may call this endpoint, and which of the allowed origins it serves.
    /// Default: `[server.cors]`.
    pub cors: Option<super::cors::RawCors>,
}

/// `[endpoints.NAME.tools."UPSTREAM:TOOL"]` as written: give a `name`, a `description` or
/// both.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "ToolShape")]
pub struct RawToolShape {
    /// The tool's name on this endpoint: 1 to 128 characters of letters, digits, `_`, `-`,
    /// `.` and `/`.
    #[schemars(extend("pattern" = "^[A-Za-z0-9_./-]{1,128}$"))]
    pub name: Option<String>,
    /// The tool's description on this endpoint.
    pub description: Option<String>,
}

impl Checker<'_> {
    pub(super) fn policy_rules(&mut self, raw: Option<&[RawRule]>) -> Vec<Rule> {
        let rules = raw.unwrap_or_default();
        let mut out = Vec::with_capacity(rules.len());
        for (i, rule) in rules.iter().enumerate() {
            let key = format!("policy[{i}]");
            let gate = self.gate(&key, rule.allow.as_ref(), rule.deny.as_ref());
            if rule.allow.is_none() && rule.deny.is_none() && rule.approval.is_none() {
                self.problem(
                    &key,
                    "has neither `allow`, `deny` nor `approval`: it would change nothing",
                );
            }
            let approval = rule
                .approval
                .as_ref()
                .map(|approval| self.approval(&key, approval));
            out.push(Rule {
                name: rule.name.clone().unwrap_or_else(|| key.clone()),
                who: self.who(&format!("{key}.who"), rule.who.as_ref()),
                gate,
                approval,
            });
        }
        out
    }

    pub(super) fn who(&mut self, key: &str, raw: Option<&RawWho>) -> Who {
        let Some(raw) = raw else {
            return Who::default();
        };
        let principals = raw
            .principals
            .as_ref()
            .map(|texts| self.globs(&format!("{key}.principals"), texts));
        let claims = raw
            .claims
            .iter()
            .flat_map(Entries::iter)
            .map(|(claim, wanted)| {
                let values = match wanted {
                    OneOrMany::One(value) => vec![value.clone()],
                    OneOrMany::Many(values) => values.clone(),
                };
                (claim.to_owned(), values)
            })
            .collect();
        Who {
            principals,
            groups: raw.groups.clone(),
            scopes: raw.scopes.clone(),
            claims,
        }
    }

    fn gate(&mut self, key: &str, allow: Option<&RawItems>, deny: Option<&RawItems>) -> Gate {
        Gate {
            allow: self.items(&format!("{key}.allow"), allow),
            deny: self.items(&format!("{key}.deny"), deny),
        }
    }

    pub(super) fn items(&mut self, key: &str, raw: Option<&RawItems>) -> Items {
        let Some(raw) = raw else {
            return Items::default();
        };
        let mut patterns = |kind: &str, texts: &Option<Vec<String>>| {
            texts.as_ref().map(|texts| {
                texts
                    .iter()
                    .filter_map(|text| match ItemPattern::new(text) {
                        Ok(pattern) => Some(pattern),
                        Err(reason) => {
                            self.problem(format!("{key}.{kind}"), reason);
                            None
                        }
                    })
                    .collect()
            })
        };
        let tools = patterns("tools", &raw.tools);
        let prompts = patterns("prompts", &raw.prompts);
        let resources = patterns("resources", &raw.resources);
        for text in raw.resources.iter().flatten() {
            if let Some(reason) = unnormal_resource_pattern(text) {
                self.problem(format!("{key}.resources"), reason);
            }
        }
        Items {
            upstreams: raw
                .upstreams
                .as_ref()
                .map(|texts| self.globs(&format!("{key}.upstreams"), texts)),
            tools,
            prompts,
            resources,
        }
    }

    /// The calls a rule at `key` names by `upstreams` and `tools`.
    pub(super) fn calls(
        &mut self,
        key: &str,
        upstreams: Option<&Vec<String>>,
        tools: Option<&Vec<String>>,
    ) -> Calls {
        let upstreams = upstreams.map(|texts| self.globs(&format!("{key}.upstreams"), texts));
        let tools = tools.map(|texts| {
            (texts.iter())
                .filter_map(|text| {
                    ItemPattern::new(text)
                        .map_err(|reason| self.problem(format!("{key}.tools"), reason))
                        .ok()
                })
                .collect()
        });
        Calls { upstreams, tools }
    }

    fn globs(&mut self, key: &str, texts: &[String]) -> Vec<Glob> {
        texts
            .iter()
            .filter_map(|text| match Glob::new(text) {
                Ok(glob) => Some(glob),
                Err(reason) => {
                    self.problem(key, reason);
                    None
                }
            })
            .collect()
    }

    pub(super) fn endpoints(
        &mut self,
        raw: Option<&Entries<RawEndpoint>>,
        main_path: &str,
        search_threshold: Option<u64>,
    ) -> Vec<EndpointSettings> {
        let Some(raw) = raw else {
            return Vec::new();
        };
        for name in &raw.duplicates {
            self.problem(
                format!("endpoints.{}", key_segment(name)),
                "is defined twice",
            );
        }
        let mut paths: HashMap<String, String> = HashMap::new();
        paths.insert(main_path.to_owned(), "server.endpoint_path".to_owned());
        raw.iter()
            .map(|(name, endpoint)| {
                let key = format!("endpoints.{}", key_segment(name));
                self.endpoint(&key, name, endpoint, &mut paths, search_threshold)
            })
            .collect()
    }

    fn endpoint(
        &mut self,
        key: &str,
        name: &str,
        raw: &RawEndpoint,
        paths: &mut HashMap<String, String>,
        search_threshold: Option<u64>,
    ) -> EndpointSettings {
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            self.problem(
                key,
                "an endpoint's name holds only letters, digits, `-` and `_`",
            );
        }
        let path = raw
            .path
            .clone()
            .unwrap_or_else(|| format!("/profiles/{name}/mcp"));
        let path_key = format!("{key}.path");
        if !path.starts_with('/') || path.contains(['?', '#']) {
            self.problem(
                &path_key,
                format!("`{path}` must be a path starting with `/`"),
            );
        } else if is_reserved_path(&path) {
            self.problem(
                &path_key,
                format!("`{path}` is taken by Switchyard's own endpoints"),
            );
        } else if let Some(taken) = paths.insert(path.clone(), key.to_owned()) {
            self.problem(&path_key, format!("`{path}` is already served by {taken}"));
        }
        let prefix_mode = raw
            .prefix_mode
            .as_deref()
            .and_then(|text| self.prefix_mode(&format!("{key}.prefix_mode"), text));
        let mut gate = self.gate(key, raw.allow.as_ref(), raw.deny.as_ref());
        if let Some(upstreams) = &raw.upstreams {
            if gate.allow.upstreams.is_some() {
                self.problem(
                    format!("{key}.upstreams"),
                    "give the upstreams once: here or in `allow.upstreams`",
                );
            }
            gate.allow.upstreams = Some(self.globs(&format!("{key}.upstreams"), upstreams));
        }
        let tools = raw
            .tools
            .iter()
            .flat_map(Entries::iter)
            .filter_map(|(item, shape)| {
                let tool_key = format!("{key}.tools.{}", key_segment(item));
                self.tool_shape(&tool_key, item, shape)
            })
            .collect();
        let tool_search = raw.tool_search.as_deref().and_then(|text| {
            self.tool_search(
                &format!("{key}.tool_search"),
                text,
                search_threshold.unwrap_or(super::catalog::DEFAULT_SEARCH_THRESHOLD),
            )
        });
        let inline_resources = self.inlining(key, raw.inline_resources, raw.inline_max_bytes);
        EndpointSettings {
            name: name.into(),
            path,
            prefix_mode,
            tool_search,
            gate,
            tools,
            inline_resources,
        }
    }

    fn tool_shape(
        &mut self,
        key: &str,
        item: &str,
        raw: &RawToolShape,
    ) -> Option<((String, String), ToolShape)> {
        let Some((upstream, tool)) = item
            .split_once(':')
            .filter(|(u, t)| !u.is_empty() && !t.is_empty() && !u.contains(['*', '?', '[', '{']))
        else {
            self.problem(
                key,
                "name one tool as \"UPSTREAM:TOOL\" (the upstream's own name for it)",
            );
            return None;
        };
        if let Some(name) = &raw.name {
            let valid = (1..=MAX_TOOL_NAME_LEN).contains(&name.len())
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_-./".contains(&b));
            if !valid {
                self.problem(
                    format!("{key}.name"),
                    format!(
                        "`{name}` is not a tool name: 1–{MAX_TOOL_NAME_LEN} characters of \
                         letters, digits, `_`, `-`, `.` and `/`"
                    ),
                );
            }
        }
        if raw.name.is_none() && raw.description.is_none() {
            self.problem(key, "give a `name`, a `description` or both");
        }
        Some((
            (upstream.to_owned(), tool.to_owned()),
            ToolShape {
                name: raw.name.clone(),
                description: raw.description.clone(),
            },
        ))
    }
}

/// Why a resource pattern (`UPSTREAM:URI`) could never match, if it could not: URIs are
/// judged normalized (`policy::normalize_uri`), their scheme and host in lowercase and
/// without `.` or `..` segments.
fn unnormal_resource_pattern(text: &str) -> Option<String> {
    let (_, uri) = text.split_once(':')?;
    let (scheme, rest) = uri.split_once(':')?;
    let authority = rest
        .strip_prefix("//")
        .map(|after| after.split('/').next().unwrap_or_default())
        .unwrap_or_default();
    if scheme
        .chars()
        .chain(authority.chars())
        .any(|c| c.is_ascii_uppercase())
    {
        return Some(format!(
            "`{text}` never matches: URIs are compared with their scheme and host in lowercase"
        ));
    }
    let path = rest.split(['?', '#']).next().unwrap_or_default();
    path.split('/')
        .any(|segment| segment == "." || segment == "..")
        .then(|| format!("`{text}` never matches: URIs are compared without `.` and `..` segments"))
}
