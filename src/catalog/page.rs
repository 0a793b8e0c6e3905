//! Pagination of the merged lists: opaque cursors that name the list, the catalog snapshot and
//! a position in it, so a client paging through a list sees one consistent snapshot even if the
//! catalog changes meanwhile.

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};

/// Which merged list a cursor pages through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    Tools,
    Prompts,
    Resources,
    Templates,
}

impl ListKind {
    /// The list `method` asks for, if it asks for one.
    pub fn of_method(method: &str) -> Option<Self> {
        match method {
            "tools/list" => Some(ListKind::Tools),
            "prompts/list" => Some(ListKind::Prompts),
            "resources/list" => Some(ListKind::Resources),
            "resources/templates/list" => Some(ListKind::Templates),
            _ => None,
        }
    }

    /// The field of the list result that holds the entries.
    pub fn field(self) -> &'static str {
        match self {
            ListKind::Tools => "tools",
            ListKind::Prompts => "prompts",
            ListKind::Resources => "resources",
            ListKind::Templates => "resourceTemplates",
        }
    }

    fn tag(self) -> &'static str {
        match self {
            ListKind::Tools => "t",
            ListKind::Prompts => "p",
            ListKind::Resources => "r",
            ListKind::Templates => "u",
        }
    }
}

/// A position in one list of one catalog snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    pub kind: ListKind,
    pub generation: u64,
    pub offset: usize,
}

impl Cursor {
    pub fn encode(&self) -> String {
        let text = format!("1:{}:{}:{}", self.kind.tag(), self.generation, self.offset);
        URL_SAFE_NO_PAD.encode(text)
    }

    /// The cursor `text` for list `kind`, if it is one Switchyard gave out for that list.
    pub fn decode(text: &str, kind: ListKind) -> Option<Self> {
        let bytes = URL_SAFE_NO_PAD.decode(text).ok()?;
        let text = std::str::from_utf8(&bytes).ok()?;
        let mut parts = text.split(':');
        let (version, tag, generation, offset) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        if version != "1" || tag != kind.tag() || parts.next().is_some() {
            return None;
        }
        Some(Self {
            kind,
            generation: generation.parse().ok()?,
            offset: offset.parse().ok()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_are_bound_to_their_list() {
        let cursor = Cursor {
            kind: ListKind::Prompts,
            generation: 7,
            offset: 40,
        };
        let text = cursor.encode();
        assert!(!text.contains(':'), "opaque: {text}");
        assert_eq!(Cursor::decode(&text, ListKind::Prompts), Some(cursor));
        assert_eq!(Cursor::decode(&text, ListKind::Tools), None);
        for junk in [
            "",
            "!!",
            "bm90IGEgY3Vyc29y",
            &URL_SAFE_NO_PAD.encode("1:p:x:1"),
        ] {
            assert_eq!(Cursor::decode(junk, ListKind::Prompts), None, "{junk}");
        }
    }
}
