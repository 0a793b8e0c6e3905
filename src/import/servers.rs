//! One server entry of a client's file, read into what Switchyard runs: a command or a URL,
//! with the client's `${…}` placeholders turned into Switchyard's (or into literal text), and
//! its secrets masked for showing.

use std::{collections::BTreeMap, path::Path};

use serde_json::Value;

use super::clients::{Client, Scope};

/// How a server is reached.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Spec {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<String>,
    },
    Remote {
        url: String,
        /// `streamable_http` or `sse` when the client said; else found out (`auto`).
        transport: Option<&'static str>,
        headers: BTreeMap<String, String>,
    },
}

/// What placeholders in a file stand for.
pub struct Context<'a> {
    pub client: Client,
    pub scope: Scope,
    pub home: &'a Path,
    pub workspace: Option<&'a Path>,
}

/// An entry as read: the server, or why it is left out; and what the user should know.
pub enum Entry {
    Server { spec: Spec, notes: Vec<String> },
    Skipped(String),
}

/// Reads the server entry `entry`.
pub fn read(entry: &Value, context: &Context<'_>) -> Result<Entry, String> {
    let Some(fields) = entry.as_object() else {
        return Err("is not an object".into());
    };
    if fields.get("disabled").and_then(Value::as_bool) == Some(true)
        || fields.get("enabled").and_then(Value::as_bool) == Some(false)
    {
        return Ok(Entry::Skipped("disabled in the client".into()));
    }
    let mut notes = Vec::new();
    if fields.contains_key("envFile") {
        notes.push("`envFile` is not read: put its variables in `env`".into());
    }
    let mut text = |value: &str| convert(value, context, &mut notes);
    let string = |key: &str| -> Result<Option<String>, String> {
        match fields.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.clone())),
            Some(_) => Err(format!("`{key}` is not a string")),
        }
    };
    // Zed's older form: `"command": {"path", "args", "env"}`.
    let (command, args, env) = match fields.get("command") {
        Some(Value::Object(command)) => (
            command
                .get("path")
                .and_then(Value::as_str)
                .map(str::to_owned),
            command.get("args"),
            command.get("env"),
        ),
        _ => (string("command")?, fields.get("args"), fields.get("env")),
    };
    let url = match string("url")? {
        Some(url) => Some(url),
        None => string("serverUrl")?,
    };
    let kind = string("type")?.or(string("transportType")?);
    let spec = match (command, url) {
        (Some(command), None) => Spec::Stdio {
            command: text(&command),
            args: strings(args, "args")?.iter().map(|arg| text(arg)).collect(),
            env: map(env, "env")?
                .into_iter()
                .map(|(name, value)| (name, text(&value)))
                .collect(),
            cwd: string("cwd")?.map(|cwd| text(&cwd)),
        },
        (None, Some(url)) => Spec::Remote {
            url: text(&url),
            transport: match kind.as_deref() {
                Some("sse") => Some("sse"),
                Some("http" | "streamable-http" | "streamableHttp" | "streamable_http") => {
                    Some("streamable_http")
                }
                _ => None,
            },
            headers: map(fields.get("headers"), "headers")?
                .into_iter()
                .map(|(name, value)| (name, text(&value)))
                .collect(),
        },
        (Some(_), Some(_)) => return Err("has both a command and a URL".into()),
        (None, None) if fields.get("source").and_then(Value::as_str) == Some("extension") => {
            return Ok(Entry::Skipped(
                "provided by a Zed extension (no command in the file)".into(),
            ));
        }
        (None, None) => return Err("has neither a command nor a URL".into()),
    };
    Ok(Entry::Server { spec, notes })
}

fn strings(value: Option<&Value>, key: &str) -> Result<Vec<String>, String> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(text) => Ok(text.clone()),
                // Numbers are given as arguments by some clients' users.
                Value::Number(number) => Ok(number.to_string()),
                _ => Err(format!("`{key}` holds something that is not a string")),
            })
            .collect(),
        Some(_) => Err(format!("`{key}` is not a list")),
    }
}

fn map(value: Option<&Value>, key: &str) -> Result<BTreeMap<String, String>, String> {
    match value {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(fields)) => fields
            .iter()
            .map(|(name, value)| match value {
                Value::String(text) => Ok((name.clone(), text.clone())),
                Value::Number(_) | Value::Bool(_) => Ok((name.clone(), value.to_string())),
                _ => Err(format!("`{key}.{name}` is not a string")),
            })
            .collect(),
        Some(_) => Err(format!("`{key}` is not an object")),
    }
}

/// `value` with the client's placeholders as Switchyard reads them: `${env:NAME}` (and
/// Claude Code's `${NAME}`, `${NAME:-default}`) stay environment variables; `${userHome}` and
/// `${workspaceFolder}` become paths; VS Code's `${input:ID}` becomes an environment variable
/// (noted); anything else, and every `${` of a client that expands nothing, is literal text.
fn convert(value: &str, context: &Context<'_>, notes: &mut Vec<String>) -> String {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let Some(end) = after.find('}') else {
            out.push_str("$${");
            rest = after;
            continue;
        };
        let inside = &after[..end];
        rest = &after[end + 1..];
        if !context.client.expands() {
            out.push_str("$${");
            out.push_str(inside);
            out.push('}');
            continue;
        }
        out.push_str(&placeholder(inside, context, notes));
    }
    out.push_str(rest);
    out
}

fn placeholder(inside: &str, context: &Context<'_>, notes: &mut Vec<String>) -> String {
    let literal = |notes: &mut Vec<String>, why: String| {
        notes.push(why);
        format!("$${{{inside}}}")
    };
    if let Some(spec) = inside.strip_prefix("env:") {
        return format!("${{env:{spec}}}");
    }
    let name = inside.split(":-").next().unwrap_or_default();
    if is_variable(name) && name.chars().all(|c| !c.is_ascii_lowercase()) {
        return format!("${{env:{inside}}}");
    }
    match inside {
        "userHome" => return context.home.display().to_string(),
        "workspaceFolder" | "workspaceRoot" => {
            return match (context.scope, context.workspace) {
                (Scope::Workspace, Some(workspace)) => workspace.display().to_string(),
                _ => literal(
                    notes,
                    format!("`${{{inside}}}` has no workspace here: kept as literal text"),
                ),
            };
        }
        _ => {}
    }
    if let Some(id) = inside.strip_prefix("input:") {
        let variable: String = id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_uppercase()
                } else {
                    '_'
                }
            })
            .collect();
        notes.push(format!(
            "the client asks for input `{id}`: set the environment variable {variable}"
        ));
        return format!("${{env:{variable}}}");
    }
    literal(
        notes,
        format!("`${{{inside}}}` is the client's own placeholder: kept as literal text"),
    )
}

fn is_variable(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A value that may be secret, for showing: placeholders as they are, else its first three
/// characters.
pub fn mask(value: &str) -> String {
    if value.contains("${") {
        return value.to_owned();
    }
    let shown: String = value.chars().take(3).collect();
    if value.chars().count() <= 6 {
        "…".to_owned()
    } else {
        format!("{shown}…")
    }
}

/// A command line for showing: the value after an argument that names a secret, and the
/// value of `--name=value` arguments whose name does, masked.
pub fn shown_args(args: &[String]) -> String {
    let secretive = |text: &str| {
        let lower = text.to_ascii_lowercase();
        ["key", "token", "secret", "password", "auth"]
            .iter()
            .any(|word| lower.contains(word))
    };
    let mut out = Vec::with_capacity(args.len());
    let mut hide_next = false;
    for arg in args {
        let shown = if hide_next {
            mask(arg)
        } else if let Some((name, value)) = arg.split_once('=')
            && secretive(name)
        {
            format!("{name}={}", mask(value))
        } else {
            arg.clone()
        };
        hide_next = arg.starts_with('-') && !arg.contains('=') && secretive(arg);
        out.push(shown);
    }
    out.join(" ")
}

/// A URL for showing: its query's values masked.
pub fn shown_url(url: &str) -> String {
    let Some((base, query)) = url.split_once('?') else {
        return url.to_owned();
    };
    let query: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, value)) => format!("{name}={}", mask(value)),
            None => pair.to_owned(),
        })
        .collect();
    format!("{base}?{}", query.join("&"))
}

impl Spec {
    /// Whether `other` is the same server: the same command line and environment, or the
    /// same URL and headers (whether or not a client named the transport).
    pub fn same_server(&self, other: &Spec) -> bool {
        match (self, other) {
            (
                Spec::Remote { url, headers, .. },
                Spec::Remote {
                    url: other_url,
                    headers: other_headers,
                    ..
                },
            ) => url == other_url && headers == other_headers,
            _ => self == other,
        }
    }

    /// One line for the report, secrets masked.
    pub fn describe(&self) -> String {
        match self {
            Spec::Stdio {
                command, args, env, ..
            } => {
                let mut line = format!("{command} {}", shown_args(args));
                for (name, value) in env {
                    line.push_str(&format!(" {name}={}", mask(value)));
                }
                line.trim_end().to_owned()
            }
            Spec::Remote { url, headers, .. } => {
                let mut line = shown_url(url);
                for (name, value) in headers {
                    line.push_str(&format!(" [{name}: {}]", mask(value)));
                }
                line
            }
        }
    }
}
