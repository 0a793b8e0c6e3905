//! The merged lists as clients get them: the JSON of each page of `tools/list`, `prompts/list`,
//! `resources/list` and `resources/templates/list`, written once per catalog snapshot and protocol
//! era on first use, so that serving a list is a copy of prepared bytes.
//!
//! A 2026-07-28 page carries `resultType` and the caching hints (`ttlMs`, `cacheScope`) derived
//! from what the upstreams said of their own lists; a legacy page carries neither.

use std::sync::OnceLock;

use bytes::Bytes;
use rmcp::model::CacheScope;
use serde::Serialize;

use super::{Cursor, ListKind};
use crate::{protocol::Era, wire::object::write_string};

/// How long a list may be cached and by whom, as an upstream said of its own list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheHint {
    pub ttl_ms: u64,
    pub scope: CacheScope,
}

impl CacheHint {
    /// What a list is given when not every upstream said: fresh only now, and private.
    pub const CAUTIOUS: Self = Self {
        ttl_ms: 0,
        scope: CacheScope::Private,
    };

    /// The hint for a list merged from lists with these hints (`None`: that upstream gave
    /// none): the shortest time, public only if all are.
    pub fn merged(hints: impl IntoIterator<Item = Option<CacheHint>>) -> Self {
        let mut merged: Option<CacheHint> = None;
        for hint in hints {
            let Some(hint) = hint else {
                return Self::CAUTIOUS;
            };
            merged = Some(match merged {
                None => hint,
                Some(so_far) => CacheHint {
                    ttl_ms: so_far.ttl_ms.min(hint.ttl_ms),
                    scope: if so_far.scope == CacheScope::Public && hint.scope == CacheScope::Public
                    {
                        CacheScope::Public
                    } else {
                        CacheScope::Private
                    },
                },
            });
        }
        merged.unwrap_or(Self::CAUTIOUS)
    }
}

/// One list's pages, prepared on first use for each era.
#[derive(Debug)]
pub struct PreparedList {
    kind: ListKind,
    hint: CacheHint,
    page_size: usize,
    /// Per era (legacy, modern), per page.
    pages: [Box<[OnceLock<Bytes>]>; 2],
}

impl PreparedList {
    pub fn new(kind: ListKind, len: usize, page_size: usize, hint: CacheHint) -> Self {
        let page_size = page_size.max(1);
        let count = len.div_ceil(page_size).max(1);
        let slots = || (0..count).map(|_| OnceLock::new()).collect();
        Self {
            kind,
            hint,
            page_size,
            pages: [slots(), slots()],
        }
    }

    /// The result JSON of the page of `items` that starts at `offset`, in `era`'s shape;
    /// `generation` names the snapshot in the next page's cursor.
    pub fn page<T: Serialize>(
        &self,
        items: &[T],
        era: Era,
        offset: usize,
        generation: u64,
    ) -> Bytes {
        let slot = match era {
            Era::Legacy => 0,
            Era::Modern => 1,
        };
        let prepared = offset
            .is_multiple_of(self.page_size)
            .then(|| self.pages[slot].get(offset / self.page_size))
            .flatten();
        match prepared {
            Some(cell) => cell
                .get_or_init(|| self.write(items, era, offset, generation))
                .clone(),
            // A cursor from before a change of the page size: written for this request only.
            None => self.write(items, era, offset, generation),
        }
    }

    fn write<T: Serialize>(&self, items: &[T], era: Era, offset: usize, generation: u64) -> Bytes {
        let start = offset.min(items.len());
        let end = start.saturating_add(self.page_size).min(items.len());
        let mut out = Vec::with_capacity(64 + (end - start) * 256);
        out.push(b'{');
        if era == Era::Modern {
            out.extend_from_slice(br#""resultType":"complete","#);
        }
        write_string(&mut out, self.kind.field());
        out.push(b':');
        // Serializing catalog entries into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut out, &items[start..end]);
        if end < items.len() {
            let cursor = Cursor {
                kind: self.kind,
                generation,
                offset: end,
            };
            out.extend_from_slice(br#","nextCursor":"#);
            write_string(&mut out, &cursor.encode());
        }
        if era == Era::Modern {
            out.extend_from_slice(br#","ttlMs":"#);
            out.extend_from_slice(itoa::Buffer::new().format(self.hint.ttl_ms).as_bytes());
            out.extend_from_slice(match self.hint.scope {
                CacheScope::Public => br#","cacheScope":"public""#,
                _ => br#","cacheScope":"private""#,
            });
        }
        out.push(b'}');
        out.into()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn value(bytes: &Bytes) -> Value {
        serde_json::from_slice(bytes).unwrap()
    }

    #[test]
    fn pages_cover_the_list_and_carry_the_era_fields() {
        let items: Vec<Value> = (0..5).map(|i| json!({"name": format!("t{i}")})).collect();
        let list = PreparedList::new(ListKind::Tools, items.len(), 2, CacheHint::CAUTIOUS);
        let first = value(&list.page(&items, Era::Legacy, 0, 9));
        assert_eq!(first["tools"].as_array().unwrap().len(), 2);
        assert!(first.get("resultType").is_none() && first.get("ttlMs").is_none());
        let cursor =
            Cursor::decode(first["nextCursor"].as_str().unwrap(), ListKind::Tools).unwrap();
        assert_eq!((cursor.generation, cursor.offset), (9, 2));
        let last = value(&list.page(&items, Era::Modern, 4, 9));
        assert_eq!(last["tools"], json!([{"name": "t4"}]));
        assert!(last.get("nextCursor").is_none());
        assert_eq!(last["resultType"], "complete");
        assert_eq!(
            (last["ttlMs"].clone(), last["cacheScope"].clone()),
            (json!(0), json!("private"))
        );
        // Prepared once: the same bytes come back.
        let again = list.page(&items, Era::Legacy, 0, 9);
        assert_eq!(
            again.as_ptr(),
            list.page(&items, Era::Legacy, 0, 9).as_ptr()
        );
        // An offset off the page grid still works.
        assert_eq!(
            value(&list.page(&items, Era::Legacy, 3, 9))["tools"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
        let empty: Vec<Value> = Vec::new();
        let none = PreparedList::new(ListKind::Prompts, 0, 2, CacheHint::CAUTIOUS);
        assert_eq!(
            value(&none.page(&empty, Era::Legacy, 0, 1)),
            json!({"prompts": []})
        );
    }

    #[test]
    fn hints_merge_to_the_most_cautious() {
        let public = |ttl_ms| {
            Some(CacheHint {
                ttl_ms,
                scope: CacheScope::Public,
            })
        };
        assert_eq!(
            CacheHint::merged([public(500), public(200)]),
            public(200).unwrap()
        );
        let private = Some(CacheHint {
            ttl_ms: 900,
            scope: CacheScope::Private,
        });
        assert_eq!(
            CacheHint::merged([public(500), private]),
            CacheHint {
                ttl_ms: 500,
                scope: CacheScope::Private
            }
        );
        assert_eq!(CacheHint::merged([public(500), None]), CacheHint::CAUTIOUS);
        assert_eq!(CacheHint::merged([]), CacheHint::CAUTIOUS);
    }
}
