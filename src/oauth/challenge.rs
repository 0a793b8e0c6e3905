//! `WWW-Authenticate` challenges (RFC 9110 §11.6.1): what an upstream's 401 or 403 says about
//! how to authorize, read from its `Bearer` challenge — the protected-resource metadata URL
//! (RFC 9728), the scope it wants, and the error (`invalid_token`, `insufficient_scope`).

/// The parameters of a `Bearer` challenge that matter to an OAuth client.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Challenge {
    pub resource_metadata: Option<String>,
    pub scope: Option<String>,
    pub error: Option<String>,
    pub error_description: Option<String>,
}

impl Challenge {
    /// The `Bearer` challenge among those in `header`, if there is one.
    pub fn parse(header: &str) -> Option<Self> {
        let mut parser = Parser::new(header);
        while let Some((scheme, params)) = parser.challenge() {
            if !scheme.eq_ignore_ascii_case("bearer") {
                continue;
            }
            let mut challenge = Challenge::default();
            for (name, value) in params {
                let slot = match name.to_ascii_lowercase().as_str() {
                    "resource_metadata" => &mut challenge.resource_metadata,
                    "scope" => &mut challenge.scope,
                    "error" => &mut challenge.error,
                    "error_description" => &mut challenge.error_description,
                    _ => continue,
                };
                slot.get_or_insert(value);
            }
            return Some(challenge);
        }
        None
    }

    /// A 403 asking for more scope (step-up authorization).
    pub fn is_insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }
}

/// A reader of the challenge list grammar:
/// `challenge *( "," challenge )`, `challenge = scheme [ token68 / #auth-param ]`,
/// `auth-param = token "=" ( token / quoted-string )`.
struct Parser<'a> {
    rest: &'a str,
}

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> Self {
        Self { rest: text }
    }

    fn skip_separators(&mut self) {
        self.rest = self.rest.trim_start_matches([' ', '\t', ',']);
    }

    fn skip_spaces(&mut self) {
        self.rest = self.rest.trim_start_matches([' ', '\t']);
    }

    fn token(&mut self) -> Option<&'a str> {
        let end = self
            .rest
            .find(|c: char| !is_token_char(c))
            .unwrap_or(self.rest.len());
        if end == 0 {
            return None;
        }
        let (token, rest) = self.rest.split_at(end);
        self.rest = rest;
        Some(token)
    }

    fn quoted(&mut self) -> Option<String> {
        let mut chars = self.rest.char_indices();
        if chars.next()?.1 != '"' {
            return None;
        }
        let mut value = String::new();
        let mut escaped = false;
        for (at, c) in chars {
            match (escaped, c) {
                (true, c) => {
                    value.push(c);
                    escaped = false;
                }
                (false, '\\') => escaped = true,
                (false, '"') => {
                    self.rest = &self.rest[at + 1..];
                    return Some(value);
                }
                (false, c) => value.push(c),
            }
        }
        // An unterminated string runs to the end.
        self.rest = "";
        Some(value)
    }

    /// The next challenge: its scheme and its parameters (a token68 is skipped).
    fn challenge(&mut self) -> Option<(&'a str, Vec<(&'a str, String)>)> {
        self.skip_separators();
        let scheme = self.token()?;
        let mut params = Vec::new();
        loop {
            self.skip_separators();
            let before = self.rest;
            let Some(name) = self.token() else {
                // A token68 (`abc==`) or stray characters: skip to the next comma.
                let skip = self.rest.find(',').unwrap_or(self.rest.len());
                if skip == 0 {
                    return Some((scheme, params));
                }
                self.rest = &self.rest[skip..];
                continue;
            };
            self.skip_spaces();
            if !self.rest.starts_with('=') {
                // Not `name=`: the next challenge's scheme.
                self.rest = before;
                return Some((scheme, params));
            }
            self.rest = &self.rest[1..];
            self.skip_spaces();
            if self.rest.starts_with('=') {
                // token68 padding after a bare token: not a parameter.
                self.rest = self.rest.trim_start_matches('=');
                continue;
            }
            let value = match self.quoted() {
                Some(value) => value,
                None => self.token().unwrap_or_default().to_owned(),
            };
            params.push((name, value));
        }
    }
}

fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~/:".contains(c)
}

#[cfg(test)]
mod tests {
    use super::Challenge;

    #[test]
    fn reads_a_bearer_challenge() {
        let header = r#"Bearer realm="mcp", resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp", scope="files:read files:write""#;
        let challenge = Challenge::parse(header).unwrap();
        assert_eq!(
            challenge.resource_metadata.as_deref(),
            Some("https://mcp.example.com/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(challenge.scope.as_deref(), Some("files:read files:write"));
        assert_eq!(challenge.error, None);
    }

    #[test]
    fn finds_bearer_among_other_schemes_and_token68() {
        let header = r#"Basic realm="x", DPoP algs="ES256", Negotiate abc123==, Bearer error="insufficient_scope", scope=admin, error_description="needs \"admin\"""#;
        let challenge = Challenge::parse(header).unwrap();
        assert!(challenge.is_insufficient_scope());
        assert_eq!(challenge.scope.as_deref(), Some("admin"));
        assert_eq!(
            challenge.error_description.as_deref(),
            Some(r#"needs "admin""#)
        );
    }

    #[test]
    fn bare_bearer_and_no_bearer() {
        assert_eq!(Challenge::parse("Bearer"), Some(Challenge::default()));
        assert_eq!(Challenge::parse("bearer  "), Some(Challenge::default()));
        assert_eq!(Challenge::parse(r#"Basic realm="x""#), None);
        assert_eq!(Challenge::parse(""), None);
    }

    #[test]
    fn parameter_names_are_case_insensitive_and_first_wins() {
        let challenge =
            Challenge::parse(r#"Bearer Resource_Metadata="a", resource_metadata="b""#).unwrap();
        assert_eq!(challenge.resource_metadata.as_deref(), Some("a"));
    }
}
