//! The top-level fields of a JSON object, in order, each value a borrowed slice of the input; and
//! writing such an object back with some fields replaced or left out. This is how a request's
//! `params.name` or `_meta` is changed while everything else passes through byte for byte.

use std::{borrow::Cow, fmt};

use arrayvec::ArrayVec;
use serde::{
    Deserialize, Deserializer,
    de::{MapAccess, Visitor},
};
use serde_json::value::RawValue;

/// One field: its name (unescaped) and its value as written.
type Field<'a> = (Cow<'a, str>, &'a RawValue);

/// The fields of one JSON object, in the order written: the first few kept inline (the params
/// of a request seldom have more), the rest after them. Covariant in `'a`, so that a message's
/// fields can be kept beside the body they borrow from (`wire::Parsed`).
#[derive(Debug, Default)]
pub struct Fields<'a> {
    first: ArrayVec<Field<'a>, 6>,
    rest: Vec<Field<'a>>,
}

/// What to do with a field when writing the object back.
pub enum Edit<'e> {
    /// Keep it as it was.
    Keep,
    /// Leave it out.
    Drop,
    /// Write this JSON text as its value.
    Value(&'e str),
    /// Write this text, as a JSON string, as its value.
    String(&'e str),
}

impl<'a> Fields<'a> {
    /// The fields of the JSON object `value`; `None` if it is not an object. A `RawValue` is
    /// valid JSON, so it is split where its values end rather than read again.
    pub fn of(value: &'a RawValue) -> Option<Self> {
        let mut fields = Self::default();
        super::split::object_fields(value, |key, value| fields.push((key, value)))?;
        Some(fields)
    }

    /// The fields of the JSON object written as `text`; `None` if it is not one (or not JSON).
    pub fn of_text(text: &'a str) -> Option<Self> {
        serde_json::from_str(text).ok()
    }

    /// The value of field `name`, as written.
    pub fn get(&self, name: &str) -> Option<&'a RawValue> {
        self.all()
            .find(|(key, _)| key == name)
            .map(|(_, value)| *value)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &'a RawValue)> {
        self.all().map(|(key, value)| (key.as_ref(), *value))
    }

    pub fn is_empty(&self) -> bool {
        self.first.is_empty()
    }

    fn all(&self) -> impl Iterator<Item = &Field<'a>> {
        self.first.iter().chain(&self.rest)
    }

    fn push(&mut self, field: Field<'a>) {
        if let Err(full) = self.first.try_push(field) {
            self.rest.push(full.element());
        }
    }

    /// Writes the object to `out`: each field as `edit` says, then `added` fields (name, JSON
    /// text) at the end.
    pub fn write<'e>(
        &self,
        out: &mut Vec<u8>,
        mut edit: impl FnMut(&str) -> Edit<'e>,
        added: &[(&str, &str)],
    ) {
        out.push(b'{');
        let mut first = true;
        let mut name = |out: &mut Vec<u8>, key: &str| {
            if !first {
                out.push(b',');
            }
            first = false;
            write_string(out, key);
            out.push(b':');
        };
        for (key, value) in self.all() {
            match edit(key) {
                Edit::Keep => {
                    name(out, key);
                    out.extend_from_slice(value.get().as_bytes());
                }
                Edit::Drop => {}
                Edit::Value(text) => {
                    name(out, key);
                    out.extend_from_slice(text.as_bytes());
                }
                Edit::String(text) => {
                    name(out, key);
                    write_string(out, text);
                }
            }
        }
        for (key, value) in added {
            name(out, key);
            out.extend_from_slice(value.as_bytes());
        }
        out.push(b'}');
    }
}

/// Writes `text` as a JSON string.
pub fn write_string(out: &mut Vec<u8>, text: &str) {
    // Writing a string into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, text);
}

impl<'de> Deserialize<'de> for Fields<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FieldsVisitor;
        impl<'de> Visitor<'de> for FieldsVisitor {
            type Value = Fields<'de>;

            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a JSON object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut fields = Fields::default();
                while let Some(CowStr(key)) = map.next_key()? {
                    let value: &'de RawValue = map.next_value()?;
                    fields.push((key, value));
                }
                Ok(fields)
            }
        }
        deserializer.deserialize_map(FieldsVisitor)
    }
}

/// A JSON string, borrowed from the input unless it had escapes. (serde's own `Cow<str>`
/// always copies.)
pub struct CowStr<'a>(pub Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for CowStr<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct CowStrVisitor;
        impl<'de> Visitor<'de> for CowStrVisitor {
            type Value = CowStr<'de>;

            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a string")
            }

            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Self::Value, E> {
                Ok(CowStr(Cow::Borrowed(text)))
            }

            fn visit_str<E>(self, text: &str) -> Result<Self::Value, E> {
                Ok(CowStr(Cow::Owned(text.to_owned())))
            }
        }
        deserializer.deserialize_str(CowStrVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    #[test]
    fn fields_keep_their_order_and_bytes() {
        let value = raw(r#"{ "name" : "a__b", "arguments": {"x": [1,2]}, "_meta": {"k": 1} }"#);
        let fields = Fields::of(&value).unwrap();
        let keys: Vec<&str> = fields.iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["name", "arguments", "_meta"]);
        assert_eq!(fields.get("arguments").unwrap().get(), r#"{"x": [1,2]}"#);
        assert!(fields.get("missing").is_none());
        assert!(Fields::of(&raw("[1]")).is_none());
        assert!(Fields::of(&raw("{}")).unwrap().is_empty());
    }

    #[test]
    fn an_object_of_many_fields_keeps_them_all_in_order() {
        let text: String = (0..10)
            .map(|i| format!(r#""k{i}":{i}"#))
            .collect::<Vec<_>>()
            .join(",");
        let value = RawValue::from_string(format!("{{{text}}}")).unwrap();
        let fields = Fields::of(&value).unwrap();
        let keys: Vec<&str> = fields.iter().map(|(k, _)| k).collect();
        let expected: Vec<String> = (0..10).map(|i| format!("k{i}")).collect();
        assert_eq!(keys, expected);
        assert_eq!(fields.get("k9").unwrap().get(), "9");
        let mut out = Vec::new();
        fields.write(&mut out, |_| Edit::Keep, &[]);
        assert_eq!(out, format!("{{{text}}}").into_bytes());
    }

    #[test]
    fn writing_replaces_drops_and_adds_fields() {
        let value = raw(r#"{"name":"a__b","arguments":{"x":"y\n"},"_meta":{}}"#);
        let fields = Fields::of(&value).unwrap();
        let mut out = Vec::new();
        fields.write(
            &mut out,
            |key| match key {
                "name" => Edit::String("b\u{1}"),
                "_meta" => Edit::Drop,
                _ => Edit::Keep,
            },
            &[("extra", "true")],
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"name":"b\u0001","arguments":{"x":"y\n"},"extra":true}"#
        );
    }

    #[test]
    fn escaped_keys_are_written_back_escaped() {
        let value = raw(r#"{"a\"b":1}"#);
        let fields = Fields::of(&value).unwrap();
        let mut out = Vec::new();
        fields.write(&mut out, |_| Edit::Keep, &[]);
        assert_eq!(String::from_utf8(out).unwrap(), r#"{"a\"b":1}"#);
    }
}
