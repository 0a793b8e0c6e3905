//! The check at a glance against the validator: which schemas it takes, and that arguments it
//! passes are valid by the validator too, whatever the schema of its kind and the arguments.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

fn schema(value: Value) -> JsonObject {
    match value {
        Value::Object(object) => object,
        _ => unreachable!(),
    }
}

fn raw(value: &Value) -> Box<RawValue> {
    RawValue::from_string(value.to_string()).unwrap()
}

#[test]
fn schemas_that_ask_only_for_types_are_checked_at_a_glance() {
    let echo = schema(json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "EchoArgs",
        "type": "object",
        "properties": {"text": {"type": "string", "description": "What to say"}},
        "required": ["text"]
    }));
    let shallow = Shallow::of(&echo).unwrap();
    assert!(shallow.passes(Some(&raw(&json!({"text": "hi"})))));
    assert!(shallow.passes(Some(&raw(&json!({"text": "hi", "more": 1})))));
    assert!(!shallow.passes(Some(&raw(&json!({"text": 1})))), "a number");
    assert!(!shallow.passes(Some(&raw(&json!({})))), "missing");
    assert!(!shallow.passes(None), "none given, one required");
    assert!(
        !shallow.passes(Some(&raw(&json!(["text"])))),
        "not an object"
    );

    let closed = schema(json!({
        "type": "object",
        "properties": {
            "count": {"type": "integer"},
            "maybe": {"type": ["string", "null"]},
            "anything": {"description": "no type"},
            "region": {"type": "string", "x-mcp-header": "Region"}
        },
        "additionalProperties": false
    }));
    let shallow = Shallow::of(&closed).unwrap();
    assert!(shallow.passes(None));
    assert!(shallow.passes(Some(&raw(
        &json!({"count": -3, "maybe": null, "anything": [1]})
    ))));
    assert!(!shallow.passes(Some(&raw(&json!({"other": 1})))), "closed");
    assert!(!shallow.passes(Some(&raw(&json!({"count": 1.5})))));
    assert!(
        !shallow.passes(Some(&raw(&json!({"count": 2.0})))),
        "left to the validator"
    );

    for other in [
        json!({"type": "object", "properties": {"a": {"type": "string", "enum": ["x"]}}}),
        json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"}}}}),
        json!({"type": "object", "properties": {"a": {"type": "string", "format": "uri"}}}),
        json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/a"}}, "$defs": {"a": {}}}),
        json!({"type": "object", "properties": {"a": true}}),
        json!({"type": "object", "properties": {"a": {"type": "text"}}}),
        json!({"type": "object", "additionalProperties": {"type": "string"}}),
        json!({"type": "object", "minProperties": 1}),
        json!({"properties": {"a": {"type": "string"}}}),
        json!({"type": ["object"]}),
    ] {
        assert!(Shallow::of(&schema(other.clone())).is_none(), "{other}");
    }
}

#[test]
fn most_recorded_servers_tools_are_checked_at_a_glance() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/fixtures/recorded");
    let (mut tools, mut shallow) = (0, 0);
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|extension| extension != "json") {
            continue;
        }
        let text = std::fs::read_to_string(path).unwrap();
        let recorded: Value = serde_json::from_str(&text).unwrap();
        for tool in recorded["tools"].as_array().into_iter().flatten() {
            if let Value::Object(input) = &tool["inputSchema"] {
                tools += 1;
                shallow += usize::from(Shallow::of(input).is_some());
            }
        }
    }
    assert!(tools > 100, "{tools} tools");
    assert!(shallow * 2 > tools, "{shallow} of {tools}");
}

const TYPES: [&str; 7] = [
    "string", "number", "integer", "boolean", "object", "array", "null",
];

/// The drafts a schema may name (none: the validator's default).
const DRAFTS: [&str; 4] = [
    "",
    "http://json-schema.org/draft-04/schema#",
    "http://json-schema.org/draft-07/schema#",
    "https://json-schema.org/draft/2020-12/schema",
];

/// A schema of the kind: up to four properties `p0`…`p3` of some types, some required.
fn shallow_schema() -> impl Strategy<Value = Value> {
    let property = prop_oneof![
        Just(json!({})),
        proptest::sample::select(&TYPES[..]).prop_map(|kind| json!({"type": kind})),
        proptest::sample::subsequence(&TYPES[..], 1..4).prop_map(|kinds| json!({"type": kinds})),
    ];
    (
        proptest::collection::vec(property, 0..4),
        proptest::sample::subsequence(&[0usize, 1, 2, 3, 4][..], 0..3),
        proptest::option::of(any::<bool>()),
        proptest::sample::select(&DRAFTS[..]),
    )
        .prop_map(|(properties, required, additional, draft)| {
            let mut schema = json!({"type": "object", "description": "generated"});
            if !draft.is_empty() {
                schema["$schema"] = json!(draft);
            }
            schema["properties"] = (properties.into_iter().enumerate())
                .map(|(at, property)| (format!("p{at}"), property))
                .collect();
            if !required.is_empty() {
                schema["required"] = required.iter().map(|at| json!(format!("p{at}"))).collect();
            }
            if let Some(additional) = additional {
                schema["additionalProperties"] = json!(additional);
            }
            schema
        })
}

/// Arguments with values of every type, under the declared names and one more.
fn arguments() -> impl Strategy<Value = Value> {
    let value = prop_oneof![
        Just(json!(null)),
        any::<bool>().prop_map(Value::from),
        any::<i32>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        Just(json!(2.0)),
        "[a-z]{0,3}".prop_map(Value::from),
        Just(json!([1, "a"])),
        Just(json!({"k": [1]})),
    ];
    proptest::collection::vec(
        (
            proptest::sample::select(&["p0", "p1", "p2", "p3", "p4"][..]),
            value,
        ),
        0..5,
    )
    .prop_map(|fields| Value::Object(fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()))
}

proptest! {
    #[test]
    fn what_passes_at_a_glance_is_valid(schema in shallow_schema(), arguments in arguments()) {
        let Value::Object(object) = &schema else { unreachable!() };
        let shallow = Shallow::of(object).expect("of the kind");
        let validator = jsonschema::validator_for(&schema).unwrap();
        let valid = validator.is_valid(&arguments);
        let passes = shallow.passes(Some(&raw(&arguments)));
        prop_assert!(!passes || valid, "{schema} passed {arguments} at a glance");
        // It declines only what is invalid, or numbers with a fraction it leaves to the
        // validator.
        let fractions = arguments.as_object().unwrap().values().any(|v| v.is_f64());
        prop_assert!(passes || !valid || fractions, "{schema} declined {arguments}");
    }
}
