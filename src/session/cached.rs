//! Which routed requests are cached (see `gateway::ResultCache`), and under what key: the
//! upstream's `cache` and `tool_cache` rules decide; the key holds everything that shapes the
//! answer, and whose it is unless the rule shares it.

use crate::{
    config::CacheRule,
    protocol::Era,
    request::Request,
    router::{Routed, Target},
};

/// How `request` to `target` is cached, and under what key, if its upstream's rules cache it:
/// a tool call or a resource read, not one that asks for a task. The key names the upstream,
/// the item, the arguments (whatever their order), the endpoint and era (which shape the
/// answer) and, unless the rule shares results, the principal.
pub(super) fn cached_as(request: &Request, target: &Target) -> Option<(CacheRule, String)> {
    let items = &target.upstream.config().items;
    let rule = match target.kind {
        Routed::Tool => items.tool_cache(&target.original)?,
        Routed::Resource => items.cache?,
        Routed::Prompt => return None,
    };
    let params = request.message.params();
    if params.is_some_and(|params| params.get("task").is_some()) {
        return None;
    }
    let arguments = params
        .and_then(|params| params.get("arguments"))
        .and_then(|arguments| serde_json::from_str::<serde_json::Value>(arguments.get()).ok())
        .map(|arguments| canonical(&arguments))
        .unwrap_or_default();
    let principal = if rule.shared {
        ""
    } else {
        request.caller.principal.as_str()
    };
    let key = [
        target.upstream.name().as_str(),
        target.kind.method(),
        &target.original,
        &arguments,
        request.caller.endpoint.as_virtual().unwrap_or_default(),
        if request.era == Era::Modern {
            "modern"
        } else {
            "legacy"
        },
        principal,
    ]
    .join("\n");
    Some((rule, key))
}

/// `value` as JSON text with every object's keys in order.
fn canonical(value: &serde_json::Value) -> String {
    fn sorted(value: &serde_json::Value) -> serde_json::Value {
        match value {
            serde_json::Value::Object(object) => {
                let mut entries: Vec<_> = object.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                serde_json::Value::Object(
                    entries
                        .into_iter()
                        .map(|(key, value)| (key.clone(), sorted(value)))
                        .collect(),
                )
            }
            serde_json::Value::Array(items) => {
                serde_json::Value::Array(items.iter().map(sorted).collect())
            }
            other => other.clone(),
        }
    }
    sorted(value).to_string()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::canonical;

    #[test]
    fn arguments_in_any_key_order_make_one_key() {
        let a = canonical(&json!({"b": [{"y": 1, "x": 2}], "a": null}));
        let b = canonical(&json!({"a": null, "b": [{"x": 2, "y": 1}]}));
        assert_eq!(a, b);
        assert_eq!(a, r#"{"a":null,"b":[{"x":2,"y":1}]}"#);
        assert_ne!(a, canonical(&json!({"a": null, "b": [{"x": 1, "y": 2}]})));
    }
}
