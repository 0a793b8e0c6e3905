//! Argument checks: what a failure says, and what a check can cost against schemas built to make
//! it expensive (measured on this thread by the unit tests' counting allocator).

use std::time::Duration;

use serde_json::{Value, json};

use super::*;
use crate::alloc_meter::measure;

fn schema(value: Value) -> JsonObject {
    match value {
        Value::Object(object) => object,
        _ => unreachable!(),
    }
}

fn invalid(error: ArgumentError) -> String {
    match error {
        ArgumentError::Invalid(problems) => problems.join("\n"),
        other => panic!("expected an invalid-arguments error, got {other:?}"),
    }
}

/// A search filter as tools write them: a condition, or a list of filters, either of which may
/// be negated by a nested filter.
fn filter_schema() -> JsonObject {
    schema(json!({
        "type": "object",
        "properties": {"filter": {"$ref": "#/$defs/filter"}},
        "$defs": {"filter": {"anyOf": [
            {
                "type": "object",
                "properties": {
                    "field": {"type": "string"},
                    "equals": {"type": "string"},
                    "not": {"$ref": "#/$defs/filter"}
                },
                "required": ["field"]
            },
            {
                "type": "object",
                "properties": {
                    "all": {"type": "array", "items": {"$ref": "#/$defs/filter"}},
                    "not": {"$ref": "#/$defs/filter"}
                },
                "required": ["all"]
            }
        ]}}
    }))
}

/// `{"filter": {"not": {"not": … {"field": 1}}}}`, `levels` negations deep, invalid at the
/// bottom.
fn negations(levels: usize) -> Value {
    let mut filter = json!({"field": 1});
    for _ in 0..levels {
        filter = json!({"not": filter});
    }
    json!({"filter": filter})
}

/// `width` branches, `levels` deep, each leaf an object whose `next` is the whole schema again.
fn nested_branches(width: usize, levels: usize) -> JsonObject {
    fn level(width: usize, levels: usize) -> Value {
        if levels == 0 {
            return json!({"type": "object", "properties": {"next": {"$ref": "#"}}});
        }
        let branches: Vec<Value> = (0..width)
            .map(|n| {
                let mut branch = level(width, levels - 1);
                branch["minProperties"] = json!(n);
                branch
            })
            .collect();
        json!({"anyOf": branches})
    }
    schema(level(width, levels))
}

#[test]
fn a_failure_names_its_path_and_rule_but_not_the_value() {
    let check = ArgumentCheck::compile(&schema(json!({
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "depth": {"type": "integer", "minimum": 0}
        },
        "required": ["path"]
    })))
    .unwrap();
    assert!(
        check
            .check(Some(&json!({"path": "/tmp", "depth": 2})))
            .is_ok()
    );
    let error = invalid(
        check
            .check(Some(&json!({"path": "/tmp", "depth": "secret-value"})))
            .unwrap_err(),
    );
    assert!(error.contains("/depth"), "{error}");
    assert!(error.contains("type"), "{error}");
    assert!(!error.contains("secret-value"), "{error}");
    let missing = invalid(check.check(None).unwrap_err());
    assert!(missing.contains("required"), "{missing}");
}

#[test]
fn every_problem_is_named_up_to_a_cap() {
    let check = ArgumentCheck::compile(&schema(json!({
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "depth": {"type": "integer", "minimum": 0},
            "tags": {"type": "array", "items": {"type": "string"}}
        },
        "required": ["path", "mode"]
    })))
    .unwrap();
    let Err(ArgumentError::Invalid(problems)) =
        check.check(Some(&json!({"depth": -1, "tags": ["a", 2]})))
    else {
        panic!("invalid")
    };
    assert_eq!(problems.len(), 4, "{problems:?}");
    let all = problems.join("\n");
    for expected in ["/depth", "/tags/1", "required"] {
        assert!(all.contains(expected), "{expected} in {all}");
    }
    let many: Vec<i64> = (0..50).collect();
    let Err(ArgumentError::Invalid(problems)) =
        check.check(Some(&json!({"path": "/", "mode": 1, "tags": many})))
    else {
        panic!("invalid")
    };
    assert_eq!(problems.len(), MOST_PROBLEMS + 1, "{problems:?}");
    assert!(problems[MOST_PROBLEMS].contains("only the first"));
}

#[test]
fn a_schema_that_is_not_one_is_refused() {
    assert!(ArgumentCheck::compile(&schema(json!({"type": 12}))).is_err());
    assert!(ArgumentCheck::compile(&schema(json!({"type": "object"}))).is_ok());
}

/// Two resources with the same `$id` (the root's, and one that a relative `$id` nested in another
/// resource resolves to), and a reference to an anchor: the validator's compiler panics on it
/// (found by fuzzing). The schema is refused, and the process goes on.
#[test]
fn a_schema_the_validator_cannot_compile_is_refused_without_a_panic() {
    let colliding = schema(json!({
        "$id": "base/item.json",
        "properties": {"m": {"$ref": "#tag"}},
        "$defs": {
            "outer": {"$id": "i", "$defs": {"inner": {"$id": "item.json"}}},
            "tagged": {"$anchor": "tag", "type": "string"}
        }
    }));
    let refused = ArgumentCheck::compile(&colliding).expect_err("refused");
    assert!(refused.contains("cannot compile"), "{refused}");
}

#[test]
fn a_recursive_filter_is_checked_as_deep_as_people_write_them() {
    let check = ArgumentCheck::compile(&filter_schema()).unwrap();
    let valid = json!({"filter": {"all": [
        {"field": "state", "equals": "open"},
        {"not": {"field": "label", "equals": "wontfix"}, "field": "author"}
    ]}});
    assert_eq!(check.check(Some(&valid)), Ok(()));
    let error = invalid(check.check(Some(&negations(5))).unwrap_err());
    assert!(error.contains("/filter"), "{error}");
    assert_eq!(
        check.check(Some(&json!({"filter": {"field": "x"}}))),
        Ok(())
    );
}

#[test]
fn a_deeply_nested_filter_is_answered_at_once_in_little_memory() {
    // 184 bytes of arguments, 18 levels deep: without a bound, telling what is wrong with
    // them took seconds and gigabytes.
    let check = ArgumentCheck::compile(&filter_schema()).unwrap();
    let arguments = negations(18);
    assert!(arguments.to_string().len() < 200);
    let (answer, cost) = measure(|| check.check(Some(&arguments)));
    let Err(ArgumentError::TooCostly(why)) = answer else {
        panic!("expected a refusal, got {answer:?}");
    };
    assert!(why.contains("less deeply"), "{why}");
    assert!(cost.peak_bytes < 10 << 20, "{cost:?}");
    assert!(cost.cpu < Duration::from_millis(5), "{cost:?}");
    // Where telling the problem fits the budget it is still told, and cheaply.
    let (answer, cost) = measure(|| check.check(Some(&negations(9))));
    assert!(
        matches!(answer, Err(ArgumentError::Invalid(_))),
        "{answer:?}"
    );
    assert!(cost.peak_bytes < 10 << 20, "{cost:?}");
}

#[test]
fn branches_that_multiply_at_every_level_are_refused_at_discovery() {
    // 4 × 4 × 4 nested `anyOf`, each of the 64 leaves going round again.
    let error = ArgumentCheck::compile(&nested_branches(4, 3)).unwrap_err();
    assert!(error.contains("cannot be checked"), "{error}");
    assert!(error.contains("nested"), "{error}");
    // Two branches round again are affordable for a few levels, then refused per call.
    let check = ArgumentCheck::compile(&nested_branches(2, 1)).unwrap();
    let mut deep = json!({});
    for _ in 0..40 {
        deep = json!({"next": deep});
    }
    let (answer, cost) = measure(|| check.check(Some(&deep)));
    assert!(
        matches!(answer, Err(ArgumentError::TooCostly(_))),
        "{answer:?}"
    );
    assert!(cost.peak_bytes < 10 << 20 && cost.cpu < Duration::from_millis(5));
}

#[test]
fn references_that_fan_out_without_recursion_are_refused_at_discovery() {
    // a1 = a0 or a0, a2 = a1 or a1, …: 2^40 paths to one subschema at one place.
    let mut defs = serde_json::Map::new();
    defs.insert("a0".into(), json!({"type": "integer"}));
    for k in 1..=40 {
        let previous = format!("#/$defs/a{}", k - 1);
        defs.insert(
            format!("a{k}"),
            json!({"anyOf": [{"$ref": previous}, {"$ref": previous}]}),
        );
    }
    let fan =
        json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/a40"}}, "$defs": defs});
    let (compiled, cost) = measure(|| ArgumentCheck::compile(&schema(fan)));
    let error = compiled.unwrap_err();
    assert!(error.contains("cannot be checked"), "{error}");
    assert!(cost.cpu < Duration::from_secs(1), "{cost:?}");
}

#[test]
fn a_reference_loop_in_place_is_refused_at_discovery() {
    let looping = schema(json!({
        "$defs": {
            "a": {"anyOf": [{"$ref": "#/$defs/b"}, {"type": "string"}]},
            "b": {"allOf": [{"$ref": "#/$defs/a"}]}
        },
        "$ref": "#/$defs/a"
    }));
    let error = ArgumentCheck::compile(&looping).unwrap_err();
    assert!(error.contains("loop"), "{error}");
}

#[test]
fn ordinary_schemas_cost_little_per_value_and_are_checked_without_counting() {
    let check = ArgumentCheck::compile(&schema(json!({
        "type": "object",
        "properties": {
            "lines": {"type": "array", "items": {"type": "string"}},
            "mode": {"enum": ["append", "replace"]},
            "options": {"anyOf": [{"type": "null"}, {"type": "object", "additionalProperties": {"type": "boolean"}}]}
        }
    })))
    .unwrap();
    assert!(
        check.profile.most <= PER_VALUE_BUDGET,
        "{:?}",
        check.profile
    );
    // A call of ordinary size is checked in one pass that allocates nothing.
    let call = json!({"lines": ["a", "b"], "mode": "append", "options": {"quiet": true}});
    let (answer, cost) = measure(|| check.check(Some(&call)));
    assert_eq!(answer, Ok(()));
    assert_eq!(cost.allocations, 0, "{cost:?}");
    // A large but plain argument is checked, however many values it has.
    let lines: Vec<String> = (0..100_000).map(|n| format!("line {n}")).collect();
    assert_eq!(
        check.check(Some(&json!({"lines": lines, "mode": "append"}))),
        Ok(())
    );
}

#[test]
fn references_by_id_and_anchor_resolve_as_the_validator_resolves_them() {
    let check = ArgumentCheck::compile(&schema(json!({
        "$id": "https://example.invalid/tool.json",
        "type": "object",
        "properties": {
            "item": {"$ref": "item.json"},
            "tag": {"$ref": "#tag"}
        },
        "$defs": {
            "item": {"$id": "item.json", "type": "object", "properties": {"child": {"$ref": "#"}}},
            "tag": {"$anchor": "tag", "type": "string"}
        }
    })))
    .unwrap();
    assert_eq!(
        check.check(Some(&json!({"item": {"child": {"child": {}}}, "tag": "x"}))),
        Ok(())
    );
    assert!(check.check(Some(&json!({"tag": 1}))).is_err());
}
