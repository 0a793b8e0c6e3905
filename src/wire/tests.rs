//! Request parsing at scale: arbitrary bytes never panic the envelope parser or the depth scan,
//! the depth scan agrees with the real nesting of any JSON value, and any well-formed request
//! comes out with its method, id and params as they went in.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::{Message, nested_deeper_than, parse};

fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "[ -~\\\\\"{}\\[\\]]{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(12, 96, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            proptest::collection::btree_map("[a-z\"{\\[]{1,6}", inner, 0..6)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

fn depth(value: &Value) -> u32 {
    match value {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn arbitrary_bytes_are_refused_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = parse(&bytes);
        let _ = nested_deeper_than(&bytes, 4);
    }

    #[test]
    fn the_depth_scan_agrees_with_the_value(value in any_json(), max in 0u32..14) {
        let text = serde_json::to_vec(&value).unwrap();
        prop_assert_eq!(nested_deeper_than(&text, max), depth(&value) > max);
    }

    #[test]
    fn well_formed_requests_keep_their_parts(
        method in "[a-z_/]{1,24}",
        id in prop_oneof![any::<i64>().prop_map(Value::from), "[a-zA-Z0-9-]{1,16}".prop_map(Value::from)],
        params in any_json(),
    ) {
        let text = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).unwrap();
        match parse(&text) {
            Ok(Message::Request(request)) => {
                prop_assert_eq!(request.method, method.as_str());
                prop_assert_eq!(serde_json::from_str::<Value>(request.id.get()).unwrap(), id);
                match request.params {
                    Some(raw) => prop_assert_eq!(serde_json::from_str::<Value>(raw.get()).unwrap(), params),
                    // `"params": null` is as good as none.
                    None => prop_assert!(params.is_null()),
                }
            }
            // Params must be an object or an array; anything else is refused, not misread.
            Ok(_) => prop_assert!(false, "parsed as something else"),
            Err(_) => prop_assert!(!params.is_object() && !params.is_array()),
        }
    }
}
