//! The configuration `switchyard import` writes: a TOML document built by a TOML writer
//! (`toml_edit`), one `[upstreams.NAME]` table per server with a comment saying where it came
//! from. Whatever a client's file holds, a name, a value or a comment cannot become TOML of its
//! own: values and keys are escaped by the writer, comments have every character that could end
//! them escaped, and the text is read back before it leaves (`verify`) to prove it holds
//! exactly the upstreams found and nothing else.

use std::{collections::BTreeMap, path::Path};

use toml_edit::{Array, DocumentMut, InlineTable, Item, Table, value};

use super::{
    merge::{Upstream, shown_path},
    servers::Spec,
};
use crate::text::printable;

const HEADER: &str = "# Written by `switchyard import` from the MCP clients' configurations found on this\n\
                      # machine. It may hold their secrets: keep it private (or move them to ${env:NAME}).\n\
                      # Check it with `switchyard check -c FILE`, run it with `switchyard -c FILE`.\n";

/// The configuration: a header, then each upstream's table.
pub fn render(upstreams: &[Upstream], home: &Path) -> String {
    let mut document = DocumentMut::new();
    let mut tables = Table::new();
    tables.set_implicit(true);
    for (index, upstream) in upstreams.iter().enumerate() {
        let mut table = spec_table(&upstream.spec);
        let mut comment = if index == 0 {
            format!("{HEADER}\n")
        } else {
            "\n".to_owned()
        };
        comment.push_str(&comment_line(&format!("From {}.", from(upstream, home))));
        for note in &upstream.notes {
            comment.push_str(&comment_line(&format!("Note: {note}.")));
        }
        table.decor_mut().set_prefix(comment);
        tables.insert(&upstream.name, Item::Table(table));
    }
    document.insert("upstreams", Item::Table(tables));
    document.to_string()
}

/// Where `upstream` was found, for its comment.
fn from(upstream: &Upstream, home: &Path) -> String {
    let sources: Vec<String> = upstream
        .sources
        .iter()
        .map(|source| {
            let named = if source.name == upstream.name {
                String::new()
            } else {
                format!(" as `{}`", source.name)
            };
            format!(
                "{} ({}){named}",
                source.client.label(),
                shown_path(&source.path, home)
            )
        })
        .collect();
    sources.join(", ")
}

/// `text` as one comment line: nothing in it can end the comment or the line.
fn comment_line(text: &str) -> String {
    format!("# {}\n", printable(text))
}

fn spec_table(spec: &Spec) -> Table {
    let mut table = Table::new();
    match spec {
        Spec::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            table.insert("command", value(command.as_str()));
            if !args.is_empty() {
                table.insert("args", value(args.iter().collect::<Array>()));
            }
            if let Some(cwd) = cwd {
                table.insert("cwd", value(cwd.as_str()));
            }
            if !env.is_empty() {
                table.insert("env", value(inline_table(env)));
            }
        }
        Spec::Remote {
            url,
            transport,
            headers,
        } => {
            if let Some(transport) = transport {
                table.insert("transport", value(*transport));
            }
            table.insert("url", value(url.as_str()));
            if !headers.is_empty() {
                table.insert("headers", value(inline_table(headers)));
            }
        }
    }
    table
}

fn inline_table(entries: &BTreeMap<String, String>) -> InlineTable {
    let mut inline = InlineTable::new();
    for (name, text) in entries {
        inline.insert(name, text.as_str().into());
    }
    inline
}

/// Reads `text` back and checks that it holds exactly `upstreams` (names and what each runs
/// or reaches) and no other key anywhere: what a client's file said cannot have added to it.
pub fn verify(upstreams: &[Upstream], text: &str) -> Result<(), String> {
    let document: toml::Table =
        toml::from_str(text).map_err(|error| format!("it is not TOML: {error}"))?;
    if let Some(other) = document.keys().find(|key| *key != "upstreams") {
        return Err(format!(
            "it has a key `{}` beside `upstreams`",
            printable(other)
        ));
    }
    let empty = toml::Table::new();
    let tables = match document.get("upstreams") {
        Some(toml::Value::Table(tables)) => tables,
        None => &empty,
        Some(_) => return Err("`upstreams` is not a table".into()),
    };
    let read: Vec<(&str, Spec)> = tables
        .iter()
        .map(|(name, table)| Ok((name.as_str(), read_spec(name, table)?)))
        .collect::<Result<_, String>>()?;
    let wanted: Vec<(&str, Spec)> = upstreams
        .iter()
        .map(|upstream| (upstream.name.as_str(), upstream.spec.clone()))
        .collect();
    if read != wanted {
        return Err(format!(
            "it holds {} upstreams where {} were found, or not as they were found",
            read.len(),
            wanted.len()
        ));
    }
    Ok(())
}

/// The server upstream `name`'s table describes, if it has no key a written one does not.
fn read_spec(name: &str, table: &toml::Value) -> Result<Spec, String> {
    let shown = printable(name);
    let toml::Value::Table(table) = table else {
        return Err(format!("upstream `{shown}` is not a table"));
    };
    let string = |key: &str| match table.get(key) {
        None => Ok(None),
        Some(toml::Value::String(text)) => Ok(Some(text.clone())),
        Some(_) => Err(format!("`upstreams.{shown}.{key}` is not a string")),
    };
    let strings = |key: &str| -> Result<BTreeMap<String, String>, String> {
        let Some(inner) = table.get(key) else {
            return Ok(BTreeMap::new());
        };
        let toml::Value::Table(inner) = inner else {
            return Err(format!("`upstreams.{shown}.{key}` is not a table"));
        };
        inner
            .iter()
            .map(|(k, v)| match v {
                toml::Value::String(text) => Ok((k.clone(), text.clone())),
                _ => Err(format!(
                    "`upstreams.{shown}.{key}` holds a value that is not a string"
                )),
            })
            .collect()
    };
    let (spec, keys): (Spec, &[&str]) = match string("command")? {
        Some(command) => {
            let args = match table.get("args") {
                None => Vec::new(),
                Some(toml::Value::Array(items)) => items
                    .iter()
                    .map(|item| item.as_str().map(str::to_owned))
                    .collect::<Option<_>>()
                    .ok_or_else(|| format!("`upstreams.{shown}.args` holds a non-string"))?,
                Some(_) => return Err(format!("`upstreams.{shown}.args` is not a list")),
            };
            let spec = Spec::Stdio {
                command,
                args,
                env: strings("env")?,
                cwd: string("cwd")?,
            };
            (spec, &["command", "args", "env", "cwd"])
        }
        None => {
            let url = string("url")?.ok_or_else(|| format!("upstream `{shown}` has no url"))?;
            let transport = match string("transport")?.as_deref() {
                None => None,
                Some("sse") => Some("sse"),
                Some("streamable_http") => Some("streamable_http"),
                Some(other) => return Err(format!("transport `{}`", printable(other))),
            };
            let spec = Spec::Remote {
                url,
                transport,
                headers: strings("headers")?,
            };
            (spec, &["transport", "url", "headers"])
        }
    };
    if let Some(other) = table.keys().find(|key| !keys.contains(&key.as_str())) {
        return Err(format!(
            "upstream `{shown}` has a key `{}` that was not written",
            printable(other)
        ));
    }
    Ok(spec)
}
