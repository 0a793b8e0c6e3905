//! Checking a tool call's arguments against the tool's input schema before the call leaves the
//! gateway, at a cost known in advance. Each schema is compiled once, when its upstream's lists
//! are discovered (every catalog snapshot and view shares the compiled form), together with
//! what a check against it can cost at worst (`cost`, from the schema's `graph`). A schema that
//! does not compile, or whose checks would cost more than the budget even for shallow
//! arguments, makes its tool an invalid definition, left out of the catalog. Remote `$ref`s are
//! never fetched: a schema must be whole.
//!
//! Most schemas ask only for the types of the arguments' top-level values: for those, arguments
//! are checked as they came, at a glance (`shallow`). Others, and arguments a glance cannot
//! pass, are read and checked whole. A check is a cheap valid-or-not pass; only arguments found
//! invalid are looked at again to say what is wrong, and only when that too fits the budget.
//! Arguments whose shape would make either pass cost more are refused before anything runs.

mod cost;
mod graph;
mod shallow;

use std::{fmt, sync::Arc};

use rmcp::model::JsonObject;
use serde_json::{Value, value::RawValue};

use self::{
    cost::{Cost, Profile},
    graph::Graph,
    shallow::Shallow,
};

/// Subschema evaluations any check may spend, whatever the arguments' size.
pub const CHECK_BUDGET: u64 = 250_000;
/// Evaluations a check may spend on top, per value in the arguments: a schema that costs no
/// more than this per value is checked whatever the arguments' size (the body's limit bounds
/// that), without counting their values first.
pub const PER_VALUE_BUDGET: u64 = 64;
/// Evaluations that saying what is wrong with invalid arguments may take; beyond it the answer
/// says only that they do not match (each evaluation may leave an error behind, so this also
/// caps the errors held at once).
pub const EXPLAIN_BUDGET: u64 = 20_000;
/// A schema that cannot afford checking one value nested this deep is refused at discovery:
/// its tool could not take arguments of an ordinary shape.
pub const SHALLOWEST_USEFUL_DEPTH: usize = 4;

/// A tool's input schema, compiled, with what checking against it can cost.
pub struct ArgumentCheck {
    validator: jsonschema::Validator,
    profile: Profile,
    /// The schema's check at a glance, if it is of that kind.
    shallow: Option<Shallow>,
}

/// The most problems named for one call's arguments.
pub const MOST_PROBLEMS: usize = 10;

/// Why a call's arguments were not let through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgumentError {
    /// They break the schema: each problem, where and how (at most `MOST_PROBLEMS`), or that
    /// telling it would cost too much.
    Invalid(Vec<String>),
    /// Checking them would cost more than the budget: what to change.
    TooCostly(String),
}

impl fmt::Display for ArgumentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Invalid(problems) => f.write_str(&problems.join("; ")),
            Self::TooCostly(why) => f.write_str(why),
        }
    }
}

impl fmt::Debug for ArgumentCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ArgumentCheck")
            .field("profile", &self.profile)
            .finish_non_exhaustive()
    }
}

impl ArgumentCheck {
    /// Compiles `schema`, or says why the gateway cannot check arguments against it: it is
    /// not a usable JSON Schema, or checking against it has no useful bound.
    pub fn compile(schema: &JsonObject) -> Result<Arc<Self>, String> {
        let schema = Value::Object(schema.clone());
        // The validator's compiler panics on some schemas an upstream may send (two resources
        // of the same `$id`, one of them with the anchor a reference names): such a schema is
        // refused like any other it cannot use, and the upstream's other tools are served.
        let compiled =
            std::panic::catch_unwind(|| jsonschema::validator_for(&schema)).map_err(|_| {
                "its input schema is not a usable JSON Schema: the validator cannot compile it"
                    .to_owned()
            })?;
        let validator = compiled
            .map_err(|error| format!("its input schema is not a usable JSON Schema: {error}"))?;
        let unbounded = |why: String| format!("its input schema cannot be checked: {why}");
        let profile = Profile::of(&Graph::of(&schema).map_err(unbounded)?).map_err(unbounded)?;
        if let Some(depth) = profile.first_over(CHECK_BUDGET)
            && depth <= SHALLOWEST_USEFUL_DEPTH
        {
            return Err(unbounded(format!(
                "one value nested {depth} level{} deep in the arguments could take more than \
                 {CHECK_BUDGET} evaluations of its subschemas (`anyOf`/`oneOf` branches or \
                 references that apply the same subschema many times over)",
                if depth == 1 { "" } else { "s" }
            )));
        }
        let shallow = Shallow::of(schema.as_object().expect("compiled from an object"));
        Ok(Arc::new(Self {
            validator,
            profile,
            shallow,
        }))
    }

    /// Whether `arguments`, as they came (absent: none were given), certainly match the
    /// schema, told at a glance where its kind allows (see `shallow`). `false` leaves it to
    /// `check`, which reads them whole.
    pub fn passes_at_once(&self, arguments: Option<&RawValue>) -> bool {
        self.shallow
            .as_ref()
            .is_some_and(|shallow| shallow.passes(arguments))
    }

    /// Checks `arguments` (absent: none were given, as `{}`). Each failure (up to
    /// `MOST_PROBLEMS`, where collecting them fits the budget; else the first) is named by
    /// where it is in the arguments and which rule of the schema it breaks; the values the
    /// client sent are never repeated.
    pub fn check(&self, arguments: Option<&Value>) -> Result<(), ArgumentError> {
        let empty = Value::Object(Default::default());
        let arguments = arguments.unwrap_or(&empty);
        // A schema cheap per value is checked at once: the body's size limit bounds the rest.
        let counted = if self.profile.most <= PER_VALUE_BUDGET {
            None
        } else {
            Some(self.afford(arguments)?)
        };
        if self.validator.is_valid(arguments) {
            return Ok(());
        }
        let cost = match counted {
            Some(cost) => cost,
            None => self.afford(arguments)?,
        };
        if cost.explain <= EXPLAIN_BUDGET {
            return Err(self.explain_all(arguments));
        }
        // Without `anyOf`/`oneOf`, the first failure is found without collecting others.
        if !self.profile.branches {
            return Err(self.explain_first(arguments));
        }
        Err(ArgumentError::Invalid(vec![
            "they do not match the tool's input schema (where is not said: its branches make \
             telling it cost more than Switchyard allows)"
                .into(),
        ]))
    }

    /// What checking `arguments` costs, if it fits the budget.
    fn afford(&self, arguments: &Value) -> Result<Cost, ArgumentError> {
        let values = values_by_depth(arguments);
        let count: u64 = values.iter().sum();
        let deepest = values.len().saturating_sub(1);
        let Some(cost) = self.profile.cost(&values) else {
            return Err(ArgumentError::TooCostly(format!(
                "arguments nested {deepest} levels deep cannot be checked against the tool's \
                 input schema at a bounded cost (its branches multiply the work at each level): \
                 nest them less deeply"
            )));
        };
        let budget = CHECK_BUDGET.saturating_add(PER_VALUE_BUDGET.saturating_mul(count));
        if cost.check > budget {
            return Err(ArgumentError::TooCostly(format!(
                "checking these arguments ({count} values, nested {deepest} levels deep) \
                 against the tool's input schema could take {} evaluations of its subschemas, \
                 more than the {budget} Switchyard allows for them: send fewer values or nest \
                 them less deeply",
                cost.check
            )));
        }
        Ok(cost)
    }

    /// Every failure of invalid `arguments` (the first `MOST_PROBLEMS`).
    fn explain_all(&self, arguments: &Value) -> ArgumentError {
        let mut problems: Vec<String> = self
            .validator
            .iter_errors(arguments)
            .take(MOST_PROBLEMS + 1)
            .map(|error| problem(&error))
            .collect();
        if problems.len() > MOST_PROBLEMS {
            problems.truncate(MOST_PROBLEMS);
            problems.push(format!(
                "(only the first {MOST_PROBLEMS} problems are named)"
            ));
        }
        if problems.is_empty() {
            problems.push("they do not match the tool's input schema".into());
        }
        ArgumentError::Invalid(problems)
    }

    /// The first failure of invalid `arguments`.
    fn explain_first(&self, arguments: &Value) -> ArgumentError {
        let problems = match self.validator.validate(arguments) {
            Err(error) => vec![
                problem(&error),
                "(the first problem; telling every one would cost more than Switchyard allows)"
                    .into(),
            ],
            Ok(()) => vec!["they do not match the tool's input schema".into()],
        };
        ArgumentError::Invalid(problems)
    }
}

/// One failure, by where it is in the arguments and which rule of the schema it breaks, the
/// value masked.
fn problem(error: &jsonschema::ValidationError<'_>) -> String {
    let at = error.instance_path().as_str();
    let at = if at.is_empty() { "/" } else { at };
    format!(
        "at `{at}`: {} (schema rule `{}`)",
        error.masked(),
        error.schema_path().as_str()
    )
}

/// How many values `arguments` has at each depth (itself at depth 0).
fn values_by_depth(arguments: &Value) -> Vec<u64> {
    let mut counts: Vec<u64> = Vec::new();
    let mut pending = vec![(arguments, 0usize)];
    while let Some((value, depth)) = pending.pop() {
        if counts.len() <= depth {
            counts.resize(depth + 1, 0);
        }
        counts[depth] += 1;
        match value {
            Value::Array(items) => pending.extend(items.iter().map(|item| (item, depth + 1))),
            Value::Object(fields) => pending.extend(fields.values().map(|v| (v, depth + 1))),
            _ => {}
        }
    }
    counts
}

#[cfg(test)]
mod tests;
