use proptest::prelude::*;
use serde_json::Value;

use super::*;
use crate::wire::Fields;

/// An object's fields as (key, value text), in order.
type Listed = Option<Vec<(String, String)>>;

/// The fields as the splitter finds them and as serde_json reads them.
fn both(text: &str) -> (Listed, Listed) {
    let value = RawValue::from_string(text.to_owned()).unwrap();
    let listed = |fields: Fields<'_>| {
        fields
            .iter()
            .map(|(key, value)| (key.to_owned(), value.get().to_owned()))
            .collect::<Vec<_>>()
    };
    let split = Fields::of(&value).map(listed);
    let read = Fields::of_text(value.get()).map(listed);
    (split, read)
}

#[test]
fn a_raw_value_is_its_text() {
    for text in [r#"{"a":1}"#, "[]", r#""x""#, "1", ""] {
        let cut = raw(text);
        assert_eq!(cut.get(), text);
        assert!(std::ptr::eq(cut.get(), text));
        assert_eq!(std::mem::size_of_val(cut), text.len());
    }
    let boxed = RawValue::from_string(r#"{"k":[1,2]}"#.to_owned()).unwrap();
    assert!(std::ptr::eq(raw(boxed.get()), &*boxed));
}

#[test]
fn objects_are_split_as_serde_json_reads_them() {
    for text in [
        r#"{"name":"a__echo","arguments":{"message":"hello"}}"#,
        "{}",
        " { } ",
        "{\t\"a\" :\r\n [1, {\"b\": \"}]\"}] ,\"c\":-1.5e3 , \"d\":true,\"e\":null}",
        r#"{"s":"quote \" and backslash \\","t":"\\","u":"\\\""}"#,
        r#"{"esc\"aped":1,"\u00e9":"é","":""}"#,
        r#"{"nested":{"deep":[[[{"x":"]"}]]]},"after":0}"#,
        r#"{"dup":1,"dup":2}"#,
    ] {
        let (split, read) = both(text);
        assert!(split.is_some(), "{text}");
        assert_eq!(split, read, "{text}");
    }
    for text in ["[1,2]", r#""{}""#, "7", "null", " [ {} ] "] {
        assert_eq!(both(text), (None, None), "{text}");
    }
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        any::<String>().prop_map(Value::String),
        "[\"\\\\{}\\[\\],: a]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(("[\"\\\\a-c]{0,4}|\\PC{0,3}", inner), 0..6)
                .prop_map(|fields| Value::Object(fields.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn any_object_splits_as_serde_json_reads_it(
        fields in prop::collection::vec(("[\"\\\\a-c]{0,4}|\\PC{0,3}", json_value()), 0..8),
        pretty in any::<bool>(),
    ) {
        let object = Value::Object(fields.into_iter().collect());
        let text = if pretty {
            serde_json::to_string_pretty(&object).unwrap()
        } else {
            serde_json::to_string(&object).unwrap()
        };
        let (split, read) = both(&text);
        prop_assert!(split.is_some());
        prop_assert_eq!(split, read);
    }

    #[test]
    fn anything_else_is_no_object(value in json_value()) {
        let text = value.to_string();
        let (split, read) = both(&text);
        prop_assert_eq!(split.is_some(), value.is_object());
        prop_assert_eq!(split, read);
    }
}
