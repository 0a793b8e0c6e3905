//! `[catalog]`: how the upstreams' lists are merged into one, as written and as checked: the
//! prefix mode, the separator between an upstream's name and its items' names, the page size;
//! whether clients get the tool list or tool search; and whether tool definitions are pinned.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;

use super::{PrefixMode, keys::Checker};
use crate::{meaning::SearchModel, policy::ToolSearch};

pub const DEFAULT_SEPARATOR: &str = "__";
const MAX_SEPARATOR_LEN: usize = 8;
const DEFAULT_PAGE_SIZE: u64 = 500;
const MAX_PAGE_SIZE: u64 = 10_000;
/// With `tool_search = "auto"`, search replaces the tool list above this many tools.
pub const DEFAULT_SEARCH_THRESHOLD: u64 = 100;

/// `[catalog]`: how upstream names are merged.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "Catalog")]
pub struct RawCatalog {
    /// When tool and prompt names carry their upstream's name (`demo__echo`) and resource
    /// URIs its scheme prefix: `always`; `conditional`, only when more than one upstream is
    /// configured; `never` (on a clash the upstream listed first wins).
    #[schemars(extend("enum" = ["always", "conditional", "never"], "default" = "always"))]
    pub prefix_mode: Option<String>,
    /// Between the upstream's name and the tool's or prompt's: 1 to 8 characters of
    /// `[A-Za-z0-9_.-]`, at least one of them `_`, `.` or an uppercase letter.
    #[schemars(
        extend("pattern" = "^[A-Za-z0-9_.-]{1,8}$", "default" = DEFAULT_SEPARATOR)
    )]
    pub separator: Option<String>,
    /// Most entries in one page of a merged list (clients follow `nextCursor`). Entries.
    #[schemars(range(min = 1, max = MAX_PAGE_SIZE), extend("default" = DEFAULT_PAGE_SIZE))]
    pub page_size: Option<u64>,
    /// Tool search instead of the tool list (clients see `search_tools` and `call_tool`):
    /// `off`, `on`, or `auto` (on above `tool_search_threshold` tools).
    #[schemars(extend("enum" = ["off", "on", "auto"], "default" = "off"))]
    pub tool_search: Option<String>,
    /// With `tool_search = "auto"`: search replaces the list when a caller sees more than
    /// this many tools. Tools.
    #[schemars(extend("default" = DEFAULT_SEARCH_THRESHOLD))]
    pub tool_search_threshold: Option<u64>,
    /// A sentence-embedding model for tool search, relative to this file's directory: a
    /// directory with `config.json`, `vocab.txt` and `model.safetensors` (a BERT-style encoder
    /// with mean pooling, such as all-MiniLM-L6-v2). Search then also finds tools by meaning,
    /// not only by the words they share with the query. Unset: search is lexical.
    pub search_model: Option<String>,
    /// Pin tool definitions: a changed definition waits for an operator's approval while the
    /// approved one is served. An upstream's `pin` overrides it.
    #[schemars(extend("default" = false))]
    pub pin: Option<bool>,
    /// A tool a pinned upstream adds later: `approve` (served at once) or `hold` (hidden until
    /// approved).
    #[schemars(extend("enum" = ["approve", "hold"], "default" = "approve"))]
    pub pin_new: Option<String>,
    /// A pinned tool whose definition changed: `serve_approved` (the approved definition is
    /// served) or `hide`, until the change is approved.
    #[schemars(extend("enum" = ["serve_approved", "hide"], "default" = "serve_approved"))]
    pub pin_changed: Option<String>,
}

/// What a pinned upstream's tool that was never approved gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinNew {
    /// Approved as it is first seen.
    Approve,
    /// Hidden until an operator approves it.
    Hold,
}

/// What a pinned tool whose definition changed gets until the change is approved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinChanged {
    /// The approved definition keeps being served.
    ServeApproved,
    /// The tool is hidden.
    Hide,
}

/// A loaded search model: the same as another when it is the same load (a reload that names
/// the same unchanged directory gets the one running).
#[derive(Debug, Clone)]
pub struct LoadedModel(pub Arc<SearchModel>);

impl PartialEq for LoadedModel {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// How upstream catalogs are merged into one.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogSettings {
    pub prefix_mode: PrefixMode,
    /// Between the upstream name and the tool or prompt name; never empty, and always holds a
    /// character that upstream names cannot contain, so the first occurrence splits a name.
    pub separator: String,
    /// Most entries in one page of a merged list.
    pub page_size: usize,
    /// Search instead of the tool list, for the main endpoint (and endpoints that do not say).
    pub tool_search: ToolSearch,
    /// The sentence encoder tool search ranks by meaning with, loaded.
    pub search_model: Option<LoadedModel>,
    /// Pin tool definitions of upstreams that do not say.
    pub pin: bool,
    pub pin_new: PinNew,
    pub pin_changed: PinChanged,
}

impl Default for CatalogSettings {
    /// What `[catalog]` is when the file says nothing.
    fn default() -> Self {
        Self {
            prefix_mode: PrefixMode::Always,
            separator: DEFAULT_SEPARATOR.into(),
            page_size: DEFAULT_PAGE_SIZE as usize,
            tool_search: ToolSearch::Off,
            search_model: None,
            pin: false,
            pin_new: PinNew::Approve,
            pin_changed: PinChanged::ServeApproved,
        }
    }
}

impl Checker<'_> {
    /// A `prefix_mode` value at `key`.
    pub(super) fn prefix_mode(&mut self, key: &str, text: &str) -> Option<PrefixMode> {
        match text {
            "always" => Some(PrefixMode::Always),
            "conditional" => Some(PrefixMode::Conditional),
            "never" => Some(PrefixMode::Never),
            other => {
                self.problem(
                    key,
                    format!("`{other}` is not one of `always`, `conditional`, `never`"),
                );
                None
            }
        }
    }

    pub(super) fn catalog(&mut self, raw: &RawCatalog) -> CatalogSettings {
        let prefix_mode = raw
            .prefix_mode
            .as_deref()
            .map_or(Some(PrefixMode::Always), |text| {
                self.prefix_mode("catalog.prefix_mode", text)
            })
            .unwrap_or(PrefixMode::Always);
        let separator = raw
            .separator
            .clone()
            .unwrap_or_else(|| DEFAULT_SEPARATOR.into());
        if let Err(reason) = check_separator(&separator) {
            self.problem("catalog.separator", reason);
        }
        let page_size = raw.page_size.unwrap_or(DEFAULT_PAGE_SIZE);
        if !(1..=MAX_PAGE_SIZE).contains(&page_size) {
            self.problem(
                "catalog.page_size",
                format!("must be between 1 and {MAX_PAGE_SIZE}, not {page_size}"),
            );
        }
        let threshold = raw
            .tool_search_threshold
            .unwrap_or(DEFAULT_SEARCH_THRESHOLD);
        let tool_search = match raw.tool_search.as_deref() {
            None => ToolSearch::Off,
            Some(text) => self
                .tool_search("catalog.tool_search", text, threshold)
                .unwrap_or(ToolSearch::Off),
        };
        let search_model = raw.search_model.as_deref().and_then(|dir| {
            let dir = self.base_dir.join(dir);
            SearchModel::open(&dir)
                .map(LoadedModel)
                .map_err(|reason| self.problem("catalog.search_model", reason))
                .ok()
        });
        let pin_new = match raw.pin_new.as_deref() {
            None | Some("approve") => PinNew::Approve,
            Some("hold") => PinNew::Hold,
            Some(other) => {
                self.problem(
                    "catalog.pin_new",
                    format!("`{other}` is not one of `approve`, `hold`"),
                );
                PinNew::Approve
            }
        };
        let pin_changed = match raw.pin_changed.as_deref() {
            None | Some("serve_approved") => PinChanged::ServeApproved,
            Some("hide") => PinChanged::Hide,
            Some(other) => {
                self.problem(
                    "catalog.pin_changed",
                    format!("`{other}` is not one of `serve_approved`, `hide`"),
                );
                PinChanged::ServeApproved
            }
        };
        CatalogSettings {
            prefix_mode,
            separator,
            page_size: page_size.clamp(1, MAX_PAGE_SIZE) as usize,
            tool_search,
            search_model,
            pin: raw.pin.unwrap_or(false),
            pin_new,
            pin_changed,
        }
    }

    /// A `tool_search` value at `key` (`auto` turns search on above `threshold` tools).
    pub(super) fn tool_search(
        &mut self,
        key: &str,
        text: &str,
        threshold: u64,
    ) -> Option<ToolSearch> {
        match text {
            "off" => Some(ToolSearch::Off),
            "on" => Some(ToolSearch::On),
            "auto" => Some(ToolSearch::Above(threshold as usize)),
            other => {
                self.problem(key, format!("`{other}` is not one of `off`, `on`, `auto`"));
                None
            }
        }
    }
}

/// Separator rules: 1–8 characters of `[A-Za-z0-9_.-]` with at least one that cannot appear in
/// an upstream name, so the first occurrence in `{upstream}{sep}{name}` marks the split.
pub fn check_separator(separator: &str) -> Result<(), String> {
    if separator.is_empty() || separator.len() > MAX_SEPARATOR_LEN {
        return Err(format!("must be 1 to {MAX_SEPARATOR_LEN} characters long"));
    }
    if !separator
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
    {
        return Err(format!(
            "`{separator}` may only use letters, digits, `_`, `.` and `-` \
             (the characters MCP allows in tool names)"
        ));
    }
    if separator
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        return Err(format!(
            "`{separator}` must contain a character that upstream names cannot hold \
             (`_`, `.` or an uppercase letter), or prefixed names could not be split"
        ));
    }
    Ok(())
}
