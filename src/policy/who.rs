//! Whom a rule applies to: conditions on the principal's identifier, groups, scopes and
//! validated token claims. Every condition written must hold; each lists alternatives.

use serde_json::Value;

use super::Glob;
use crate::principal::Principal;

/// A rule's `who`; nothing written matches everyone, the anonymous principal included.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Who {
    /// Globs over principal identifiers (`user:jwt:alice`, `user:key:ci`, `anonymous`).
    pub principals: Option<Vec<Glob>>,
    /// Any of these groups (from the JWT's groups claim, or the API key's `groups`).
    pub groups: Option<Vec<String>>,
    /// Any of these scopes.
    pub scopes: Option<Vec<String>>,
    /// Each claim (a dotted path reaches into objects: `realm_access.roles`) has one of its
    /// values, or, for a list claim, holds one of them.
    pub claims: Vec<(String, Vec<String>)>,
}

impl Who {
    pub fn matches(&self, principal: &Principal) -> bool {
        if let Some(globs) = &self.principals
            && !globs.iter().any(|glob| glob.is_match(principal.as_str()))
        {
            return false;
        }
        let identity = principal.identity();
        let holds = |wanted: &Option<Vec<String>>,
                     has: fn(&crate::principal::Identity) -> &[String]| {
            wanted.as_ref().is_none_or(|wanted| {
                identity.is_some_and(|identity| has(identity).iter().any(|g| wanted.contains(g)))
            })
        };
        if !holds(&self.groups, |i| &i.groups) || !holds(&self.scopes, |i| &i.scopes) {
            return false;
        }
        self.claims.iter().all(|(path, wanted)| {
            identity
                .and_then(|identity| claim(&identity.claims, path))
                .is_some_and(|value| has_value(value, wanted))
        })
    }
}

/// The claim at `path`: the key itself if the token has it, else a dotted path into objects.
fn claim<'a>(claims: &'a serde_json::Map<String, Value>, path: &str) -> Option<&'a Value> {
    if let Some(value) = claims.get(path) {
        return Some(value);
    }
    let mut parts = path.split('.');
    let mut value = claims.get(parts.next()?)?;
    for part in parts {
        value = value.as_object()?.get(part)?;
    }
    Some(value)
}

fn has_value(value: &Value, wanted: &[String]) -> bool {
    match value {
        Value::Array(items) => items.iter().any(|item| has_value(item, wanted)),
        Value::String(text) => wanted.iter().any(|w| w == text),
        Value::Number(_) | Value::Bool(_) => {
            let text = value.to_string();
            wanted.contains(&text)
        }
        Value::Null | Value::Object(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::principal::Identity;

    fn user(groups: &[&str], claims: Value) -> Principal {
        Principal::authenticated(
            "jwt:alice",
            Identity {
                subject: "alice".into(),
                groups: groups.iter().map(|g| g.to_string()).collect(),
                claims: claims.as_object().unwrap().clone(),
                ..Identity::default()
            },
        )
    }

    #[test]
    fn every_written_condition_must_hold() {
        let everyone = Who::default();
        assert!(everyone.matches(&Principal::anonymous()));
        let admins = Who {
            groups: Some(vec!["admins".into(), "ops".into()]),
            ..Who::default()
        };
        assert!(admins.matches(&user(&["ops"], json!({}))));
        assert!(!admins.matches(&user(&["dev"], json!({}))));
        assert!(!admins.matches(&Principal::anonymous()));
        let acme_alice = Who {
            principals: Some(vec![Glob::new("user:jwt:*").unwrap()]),
            claims: vec![
                ("org".into(), vec!["acme".into()]),
                ("realm_access.roles".into(), vec!["reader".into()]),
                ("level".into(), vec!["3".into()]),
            ],
            ..Who::default()
        };
        let claims = json!({"org": "acme", "realm_access": {"roles": ["x", "reader"]}, "level": 3});
        assert!(acme_alice.matches(&user(&[], claims)));
        let other = json!({"org": "acme", "realm_access": {"roles": ["x"]}, "level": 3});
        assert!(!acme_alice.matches(&user(&[], other)));
        assert!(!acme_alice.matches(&Principal::anonymous()));
    }
}
