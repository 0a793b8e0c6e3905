//! Does a URI belong to an RFC 6570 template? Used only without prefixes, where the URI alone
//! must tell which upstream owns an expanded template.
//!
//! Each `{…}` expression matches any run of characters and the literal text between them must
//! appear in order; that is a `*` glob, which leftmost matching decides exactly. It can accept a
//! URI the template could not strictly produce, never reject one it could.

/// A template compiled to its literal pieces.
#[derive(Debug, Clone)]
pub struct TemplatePattern {
    /// Literals between expressions; `pieces.len() == expressions + 1`.
    pieces: Vec<String>,
}

impl TemplatePattern {
    pub fn new(template: &str) -> Self {
        let mut pieces = Vec::new();
        let mut literal = String::new();
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            literal.push_str(&rest[..open]);
            match rest[open..].find('}') {
                Some(close) => {
                    pieces.push(std::mem::take(&mut literal));
                    rest = &rest[open + close + 1..];
                }
                None => {
                    // Not a valid expression: keep the text literally.
                    literal.push_str(&rest[open..]);
                    rest = "";
                }
            }
        }
        literal.push_str(rest);
        pieces.push(literal);
        Self { pieces }
    }

    pub fn matches(&self, uri: &str) -> bool {
        let (first, rest) = self.pieces.split_first().expect("at least one piece");
        let Some(mut remaining) = uri.strip_prefix(first.as_str()) else {
            return false;
        };
        let Some((last, middle)) = rest.split_last() else {
            return remaining.is_empty();
        };
        for piece in middle {
            match remaining.find(piece.as_str()) {
                Some(at) => remaining = &remaining[at + piece.len()..],
                None => return false,
            }
        }
        remaining.ends_with(last.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::TemplatePattern;

    #[test]
    fn matches_expansions() {
        let t = TemplatePattern::new("test://template/{id}/data");
        assert!(t.matches("test://template/42/data"));
        assert!(t.matches("test://template//data"));
        assert!(!t.matches("test://template/42/other"));
        assert!(!t.matches("other://template/42/data"));
    }

    #[test]
    fn literal_template_matches_only_itself() {
        let t = TemplatePattern::new("file:///etc/hosts");
        assert!(t.matches("file:///etc/hosts"));
        assert!(!t.matches("file:///etc/hosts2"));
    }

    #[test]
    fn several_and_operator_expressions() {
        let t = TemplatePattern::new("https://api.example.com{/owner,repo}/issues{?state}");
        assert!(t.matches("https://api.example.com/a/b/issues?state=open"));
        assert!(t.matches("https://api.example.com/a/b/issues"));
        assert!(!t.matches("https://api.example.com/a/b/pulls"));
        let t = TemplatePattern::new("{scheme}://{host}");
        assert!(t.matches("x://y"));
        assert!(!t.matches("xy"));
    }

    #[test]
    fn unterminated_expression_is_literal() {
        let t = TemplatePattern::new("a{b");
        assert!(t.matches("a{b"));
        assert!(!t.matches("ab"));
    }
}
