//! Guardrails (`[[guardrail]]`): secrets and personal data looked for in tool results or call
//! arguments (`detect`), and what is done when some is found — `redact`, `block` (never
//! showing a value) or `flag`; or a policy service asked about each call (`hook`). A result's
//! `_meta`, URIs, MIME types and binary blobs are not screened; every argument is.

mod detect;
pub mod hook;

use std::{collections::BTreeMap, fmt::Write, ops::Range};

use serde_json::{Map, Value, json};

pub use detect::{ALL, Detector};

use crate::policy::Calls;

/// One `[[guardrail]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Guardrail {
    /// For the audit log: its `name`, or `guardrail[N]`.
    pub name: String,
    /// The calls it looks at.
    pub calls: Calls,
    pub check: Check,
}

/// How a guardrail looks at a call: one or the other.
#[derive(Debug, Clone, PartialEq)]
pub enum Check {
    /// Its detectors, on the arguments, the result or both.
    Detect {
        detectors: Vec<Detector>,
        action: Action,
        screen: Screen,
    },
    /// A policy service, asked before the call, after it, or both.
    Hook(hook::Hook),
}

/// What detectors screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Screen {
    /// A call's arguments, before it is sent.
    pub arguments: bool,
    /// A call's result, before the client has it.
    pub results: bool,
}

impl Guardrail {
    /// Whether it looks at calls before they are sent.
    pub fn on_calls(&self) -> bool {
        match &self.check {
            Check::Detect { screen, .. } => screen.arguments,
            Check::Hook(hook) => hook.before,
        }
    }

    /// Whether it looks at results before the client has them.
    pub fn on_results(&self) -> bool {
        match &self.check {
            Check::Detect { screen, .. } => screen.results,
            Check::Hook(hook) => hook.after,
        }
    }
}

/// What a guardrail does with a result in which it found something.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Redact,
    Block,
    Flag,
}

impl Action {
    /// The outcome of its audit record.
    pub fn done(self) -> &'static str {
        match self {
            Action::Redact => "redacted",
            Action::Block => "blocked",
            Action::Flag => "flagged",
        }
    }
}

/// What a screening found: how many of each kind.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Findings(BTreeMap<Detector, usize>);

impl Findings {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `email ×2, aws_access_key ×1`: kinds and counts, never a value.
    pub fn summary(&self) -> String {
        let mut text = String::new();
        for (detector, count) in &self.0 {
            if !text.is_empty() {
                text.push_str(", ");
            }
            let _ = write!(text, "{} ×{count}", detector.name());
        }
        text
    }
}

/// The order in which a guardrail acts, among those that cover a call: blocking detectors
/// first (they see what the client or upstream sent), then flagging and redacting ones; the
/// policy hooks last, seeing what the detectors left (in file order: the sort is stable).
pub fn order(rule: &Guardrail) -> u8 {
    match &rule.check {
        Check::Detect { action, .. } => match action {
            Action::Block => 0,
            Action::Flag => 1,
            Action::Redact => 2,
        },
        Check::Hook(_) => 3,
    }
}

/// Keys whose values are never screened: protocol fields, and binary blobs.
const UNSCREENED: [&str; 6] = ["type", "mimeType", "uri", "blob", "_meta", "annotations"];

/// Screens `result` (a tool result) with `detectors`; with `redact`, each finding is replaced
/// in place. What was found.
pub fn screen(result: &mut Value, detectors: &[Detector], redact: bool) -> Findings {
    let mut findings = Findings::default();
    walk(result, detectors, (redact, &UNSCREENED), &mut findings);
    findings
}

/// Screens `arguments` (a tool call's) as `screen` does a result, every key's value included
/// (an argument named `type` or `uri` is the tool's, not the protocol's).
pub fn screen_arguments(arguments: &mut Value, detectors: &[Detector], redact: bool) -> Findings {
    let mut findings = Findings::default();
    walk(arguments, detectors, (redact, &[]), &mut findings);
    findings
}

/// `how`: whether to redact, and the keys whose values are left alone.
fn walk(value: &mut Value, detectors: &[Detector], how: (bool, &[&str]), findings: &mut Findings) {
    let (redact, skipped) = how;
    match value {
        Value::String(text) => {
            if let Some(redacted) = scan(text, detectors, findings)
                && redact
            {
                *text = redacted;
            }
        }
        Value::Array(items) => {
            for item in items {
                walk(item, detectors, how, findings);
            }
        }
        Value::Object(fields) => {
            for (key, field) in fields.iter_mut() {
                if !skipped.contains(&key.as_str()) {
                    walk(field, detectors, how, findings);
                }
            }
        }
        _ => {}
    }
}

/// Counts what `detectors` find in `text`; `text` with the findings redacted, if any.
fn scan(text: &str, detectors: &[Detector], findings: &mut Findings) -> Option<String> {
    let mut found: Vec<(Range<usize>, Detector)> = Vec::new();
    for detector in &detect::candidates(text, detectors) {
        found.extend(
            detector
                .find(text)
                .into_iter()
                .map(|range| (range, *detector)),
        );
    }
    if found.is_empty() {
        return None;
    }
    found.sort_by_key(|(range, _)| (range.start, std::cmp::Reverse(range.end)));
    let mut redacted = String::with_capacity(text.len());
    let mut at = 0;
    for (range, detector) in found {
        if range.start < at {
            // Inside what another detector found: one finding.
            continue;
        }
        *findings.0.entry(detector).or_default() += 1;
        redacted.push_str(&text[at..range.start]);
        let _ = write!(redacted, "[REDACTED:{}]", detector.name());
        at = range.end;
    }
    redacted.push_str(&text[at..]);
    Some(redacted)
}

/// The tool result that stands for one `guardrail` withheld.
pub fn withheld(guardrail: &str, findings: &Findings) -> Value {
    withheld_because(&format!(
        "it holds {} (guardrail `{guardrail}`)",
        findings.summary()
    ))
}

/// The tool result that stands for one withheld, saying `why`.
pub fn withheld_because(why: &str) -> Value {
    let text = format!("Switchyard withheld this result: {why}.");
    let mut result = Map::new();
    result.insert("content".into(), json!([{"type": "text", "text": text}]));
    result.insert("isError".into(), Value::Bool(true));
    Value::Object(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn findings_are_redacted_in_text_structured_content_and_resources_and_nothing_else() {
        let mut result = json!({
            "content": [
                {"type": "text", "text": "mail ada@example.org, key AKIAIOSFODNN7EXAMPLE"},
                {"type": "resource", "resource": {"uri": "mailto:bob@example.org", "text": "card 4111 1111 1111 1111"}},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"}
            ],
            "structuredContent": {"owner": {"email": "ada@example.org"}, "count": 3},
            "_meta": {"contact": "meta@example.org"}
        });
        let detectors = ALL.to_vec();
        let findings = screen(&mut result, &detectors, true);
        assert_eq!(
            findings.summary(),
            "aws_access_key ×1, email ×2, card_number ×1"
        );
        assert_eq!(
            result["content"][0]["text"],
            "mail [REDACTED:email], key [REDACTED:aws_access_key]"
        );
        assert_eq!(
            result["content"][1]["resource"]["text"],
            "card [REDACTED:card_number]"
        );
        assert_eq!(
            result["content"][1]["resource"]["uri"],
            "mailto:bob@example.org"
        );
        assert_eq!(
            result["structuredContent"]["owner"]["email"],
            "[REDACTED:email]"
        );
        assert_eq!(result["_meta"]["contact"], "meta@example.org");

        let mut untouched = json!({"content": [{"type": "text", "text": "nothing here"}]});
        assert!(screen(&mut untouched, &detectors, true).is_empty());
        let mut flagged = json!({"content": [{"type": "text", "text": "ada@example.org"}]});
        assert!(!screen(&mut flagged, &detectors, false).is_empty());
        assert_eq!(
            flagged["content"][0]["text"], "ada@example.org",
            "flagging keeps it"
        );
    }

    #[test]
    fn a_withheld_result_names_kinds_never_values() {
        let mut result = json!({"content": [{"type": "text", "text": "AKIAIOSFODNN7EXAMPLE"}]});
        let findings = screen(&mut result, &ALL, false);
        let withheld = withheld("no-secrets", &findings);
        let shown = withheld.to_string();
        assert!(
            shown.contains("aws_access_key ×1") && shown.contains("no-secrets"),
            "{shown}"
        );
        assert!(!shown.contains("AKIA"), "{shown}");
        assert_eq!(withheld["isError"], true);
    }

    #[test]
    fn arguments_are_screened_under_every_key() {
        let mut arguments = json!({"type": "ada@example.org", "to": ["bob@example.org"], "n": 3});
        let findings = screen_arguments(&mut arguments, &ALL, true);
        assert_eq!(findings.summary(), "email ×2");
        assert_eq!(
            arguments,
            json!({"type": "[REDACTED:email]", "to": ["[REDACTED:email]"], "n": 3})
        );
    }
}
