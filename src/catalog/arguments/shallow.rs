//! The check at a glance: most tools' schemas ask only which types the arguments' top-level
//! values may have, which of them are required, and perhaps that no other is given. For such a
//! schema, arguments are checked as they came, by the first character of each value, without
//! being read into a JSON tree (which copies every string in them). Arguments this check is
//! not sure of (an integer written with a fraction or an exponent, a value of the wrong type, a
//! missing one) go to the validator, which decides and says what is wrong.

use rmcp::model::JsonObject;
use serde_json::{Value, value::RawValue};

use crate::wire::Fields;

/// The JSON types a value may have, as bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Types(u8);

impl Types {
    const STRING: u8 = 1;
    const NUMBER: u8 = 1 << 1;
    const INTEGER: u8 = 1 << 2;
    const BOOLEAN: u8 = 1 << 3;
    const OBJECT: u8 = 1 << 4;
    const ARRAY: u8 = 1 << 5;
    const NULL: u8 = 1 << 6;
    const ANY: Types = Types(u8::MAX);

    fn named(name: &str) -> Option<u8> {
        Some(match name {
            "string" => Self::STRING,
            "number" => Self::NUMBER,
            "integer" => Self::INTEGER,
            "boolean" => Self::BOOLEAN,
            "object" => Self::OBJECT,
            "array" => Self::ARRAY,
            "null" => Self::NULL,
            _ => return None,
        })
    }

    /// The types of a schema's `type`: one name, or a list of them.
    fn of(value: &Value) -> Option<Self> {
        match value {
            Value::String(name) => Self::named(name).map(Types),
            Value::Array(names) if !names.is_empty() => {
                names.iter().try_fold(Types(0), |all, name| {
                    Some(Types(all.0 | Self::named(name.as_str()?)?))
                })
            }
            _ => None,
        }
    }

    /// Whether `value`, valid JSON as written, certainly has one of these types.
    fn admit(self, value: &RawValue) -> bool {
        let text = value.get().trim_start();
        let bit = match text.as_bytes().first() {
            Some(b'"') => Self::STRING,
            Some(b'{') => Self::OBJECT,
            Some(b'[') => Self::ARRAY,
            Some(b't' | b'f') => Self::BOOLEAN,
            Some(b'n') => Self::NULL,
            Some(_) if self.0 & Self::NUMBER != 0 => return true,
            // Only a plain integer is one in every draft; the validator decides `1.0` and `1e3`.
            Some(_) => Self::INTEGER * u8::from(!text.contains(['.', 'e', 'E'])),
            None => return false,
        };
        self.0 & bit != 0
    }
}

/// Keywords that say nothing about what is valid.
const ANNOTATIONS: &[&str] = &[
    "$comment",
    "$id",
    "$schema",
    "default",
    "deprecated",
    "description",
    "examples",
    "readOnly",
    "title",
    "writeOnly",
];

fn is_annotation(keyword: &str) -> bool {
    ANNOTATIONS.contains(&keyword) || keyword.starts_with("x-")
}

/// A schema of the kind checked at a glance.
#[derive(Debug)]
pub struct Shallow {
    /// Each declared property and the types its value may have.
    properties: Vec<(String, Types)>,
    required: Vec<String>,
    /// No property but the declared ones may be given (`additionalProperties: false`).
    closed: bool,
}

impl Shallow {
    /// `schema` in this form, if it is of this kind: an object whose properties say at most
    /// their types, with `required` and `additionalProperties: true|false` beside them, and
    /// nothing but annotations otherwise.
    pub fn of(schema: &JsonObject) -> Option<Self> {
        let mut shallow = Self {
            properties: Vec::new(),
            required: Vec::new(),
            closed: false,
        };
        let mut object = false;
        for (keyword, value) in schema {
            match (keyword.as_str(), value) {
                ("type", Value::String(kind)) if kind == "object" => object = true,
                ("properties", Value::Object(properties)) => {
                    for (name, property) in properties {
                        shallow
                            .properties
                            .push((name.clone(), property_types(property)?));
                    }
                }
                ("required", Value::Array(names)) => {
                    for name in names {
                        shallow.required.push(name.as_str()?.to_owned());
                    }
                }
                ("additionalProperties", Value::Bool(open)) => shallow.closed = !open,
                (keyword, _) if is_annotation(keyword) => {}
                _ => return None,
            }
        }
        object.then_some(shallow)
    }

    /// Whether `arguments` (absent: none were given, as `{}`) certainly match the schema.
    /// `false` leaves it to the validator.
    pub fn passes(&self, arguments: Option<&RawValue>) -> bool {
        let Some(arguments) = arguments else {
            return self.required.is_empty();
        };
        let Some(fields) = Fields::of(arguments) else {
            return false;
        };
        let typed = fields.iter().all(|(name, value)| {
            match self
                .properties
                .iter()
                .find(|(declared, _)| declared == name)
            {
                Some((_, types)) => types.admit(value),
                None => !self.closed,
            }
        });
        typed && (self.required.iter()).all(|name| fields.get(name).is_some())
    }
}

/// The types a property's schema admits, if it says nothing more than that.
fn property_types(schema: &Value) -> Option<Types> {
    let Value::Object(schema) = schema else {
        return None;
    };
    let mut types = Types::ANY;
    for (keyword, value) in schema {
        match keyword.as_str() {
            "type" => types = Types::of(value)?,
            keyword if is_annotation(keyword) => {}
            _ => return None,
        }
    }
    Some(types)
}

#[cfg(test)]
mod tests;
