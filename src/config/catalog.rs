//! `[catalog]`: how the upstreams' lists are merged into one, as written and as checked: the
//! prefix mode, the separator between an upstream's name and its items' names, the page size.

use serde::Deserialize;

use super::{PrefixMode, keys::Checker};

pub const DEFAULT_SEPARATOR: &str = "__";
const MAX_SEPARATOR_LEN: usize = 8;
const DEFAULT_PAGE_SIZE: u64 = 500;
const MAX_PAGE_SIZE: u64 = 10_000;

/// `[catalog]`: how upstream names are merged.
#[derive(Debug, Default, Deserialize)]
pub struct RawCatalog {
    pub prefix_mode: Option<String>,
    pub separator: Option<String>,
    pub page_size: Option<u64>,
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
        CatalogSettings {
            prefix_mode,
            separator,
            page_size: page_size.clamp(1, MAX_PAGE_SIZE) as usize,
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
