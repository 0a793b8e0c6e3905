//! The module tree's imports run one way, as `src/lib.rs` lays them out: each module of the
//! request path uses only the modules below it, so the path stays a stack of layers that new
//! features hook into without cycles. A `use crate::…` that goes up fails this test, and so
//! does a circle of imports among the files of one folder (`super::…`).

use std::{collections::BTreeMap, path::Path};

/// Top-level modules by layer, the request's entry first. A module may use the modules of
/// the layers after its own.
const LAYERS: &[&[&str]] = &[
    &["admin", "handover", "passthrough", "reload", "startup"],
    &["front"],
    &["auth", "session"],
    &["router"],
    &["request"],
    &["gateway"],
    &["upstream"],
    &["pins"],
    &["approval", "catalog", "downstream", "oauth", "quota"],
    &["audit", "error", "store"],
    &["telemetry"],
    &["config", "events", "hook", "metrics", "protocol", "wire"],
    &["guardrail"],
    &["policy"],
    &[
        "clock",
        "expiring",
        "meaning",
        "names",
        "principal",
        "text",
        "wake",
    ],
    // The allocators: the unit tests' counting one, and the binary's.
    &["alloc_meter", "allocator"],
];

/// Beside the path: they may use anything, and only the command (`cli`, all the binary calls)
/// uses them.
const BESIDE: &[&str] = &["cli", "demo", "import"];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

/// Every `crate::<module>` a file mentions.
fn imports(text: &str) -> Vec<String> {
    names_after(text, "crate::")
}

/// The first name of every path after `prefix` in `text`, in order: `prefix::a::X` gives
/// `a`, and a group `prefix::{a::X, b, c::{...}}` gives `a`, `b` and `c`.
fn names_after(text: &str, prefix: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(prefix) {
        rest = &rest[at + prefix.len()..];
        let Some(group) = rest.strip_prefix('{') else {
            push_name(&mut found, rest);
            continue;
        };
        let mut depth = 1;
        let mut items = vec![String::new()];
        for c in group.chars() {
            match c {
                '{' => depth += 1,
                '}' if depth == 1 => break,
                '}' => depth -= 1,
                ',' if depth == 1 => items.push(String::new()),
                c if depth == 1 => items.last_mut().unwrap().push(c),
                _ => {}
            }
        }
        for item in items {
            push_name(&mut found, item.trim_start());
        }
    }
    found
}

/// The lowercase name `text` starts with, if any, into `found`.
fn push_name(found: &mut Vec<String>, text: &str) {
    let name: String = text
        .chars()
        .take_while(|c| c.is_ascii_lowercase() || *c == '_')
        .collect();
    if !name.is_empty() {
        found.push(name);
    }
}

fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn imports_run_down_the_request_path() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut upward: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for file in files {
        let relative = file.strip_prefix(&src).unwrap();
        let top = relative
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_owned();
        if matches!(top.as_str(), "lib" | "main") || BESIDE.contains(&top.as_str()) {
            continue;
        }
        // Unit tests may set up what they test with anything (the demo server, say).
        let is_tests = relative.file_stem().is_some_and(|stem| stem == "tests")
            || relative
                .components()
                .any(|part| part.as_os_str() == "tests");
        if is_tests {
            continue;
        }
        let own = layer_of(&top).unwrap_or_else(|| {
            panic!("module `{top}` is in no layer: add it to LAYERS (and to src/lib.rs)")
        });
        let text = std::fs::read_to_string(&file).unwrap();
        for used in imports(&text) {
            if used == top {
                continue;
            }
            let allowed = match layer_of(&used) {
                Some(layer) => layer > own,
                None => !BESIDE.contains(&used.as_str()),
            };
            if !allowed {
                upward
                    .entry(format!("{}", relative.display()))
                    .or_default()
                    .push(used);
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports that go up the request path (or across a layer): {upward:#?}"
    );
}

#[test]
fn grouped_imports_are_read() {
    let text = "use crate::{\n    catalog::X,\n    downstream::{A, B},\n    names,\n};";
    assert_eq!(imports(text), ["catalog", "downstream", "names"]);
}

/// The siblings a file of a folder names through `super::` (outside its tests).
fn sibling_imports(text: &str) -> Vec<String> {
    let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or(text);
    names_after(text, "super::")
}

/// A circle in `edges`, if there is one: its files, in order.
fn circle(edges: &BTreeMap<String, Vec<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        edges: &BTreeMap<String, Vec<String>>,
        path: &mut Vec<String>,
        done: &mut std::collections::BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            return Some(path[at..].to_vec());
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, edges, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = std::collections::BTreeSet::new();
    edges
        .keys()
        .find_map(|node| visit(node, edges, &mut Vec::new(), &mut done))
}

#[test]
fn no_folder_imports_in_a_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    // Per folder: each file's sibling imports (files and subfolders of the same folder).
    let mut folders: BTreeMap<std::path::PathBuf, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    for file in &files {
        let name = file.file_stem().unwrap().to_string_lossy().into_owned();
        // A `mod.rs` is its folder's module: `super::` from it leaves the folder.
        let (folder, own) = if name == "mod" {
            let dir = file.parent().unwrap();
            let own = dir.file_name().unwrap().to_string_lossy().into_owned();
            (dir.parent().unwrap().to_owned(), own)
        } else {
            (file.parent().unwrap().to_owned(), name.clone())
        };
        if folder == src || !file.starts_with(&src) {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        let siblings = folders.entry(folder.clone()).or_default();
        let uses = siblings.entry(own.clone()).or_default();
        // A folder module's `super::` (from its `mod.rs`) names its siblings in the folder
        // above, as a file's does in its own folder.
        for used in sibling_imports(&text) {
            let exists = folder.join(format!("{used}.rs")).exists()
                || folder.join(&used).join("mod.rs").exists();
            if exists && used != own && !uses.contains(&used) {
                uses.push(used);
            }
        }
    }
    let circles: Vec<String> = folders
        .iter()
        .filter_map(|(folder, edges)| {
            let found = circle(edges)?;
            Some(format!(
                "{}: {}",
                folder.strip_prefix(&src).unwrap().display(),
                found.join(" → ")
            ))
        })
        .collect();
    assert!(
        circles.is_empty(),
        "files of one folder that import each other in a circle (move what they share \
         into a file below both): {circles:#?}"
    );
}

#[test]
fn sibling_imports_are_read() {
    let text = "use super::{\n    keys::{Entries, key_segment},\n    raw::RawUpstream,\n};\n\
                let x = super::expand::reads_host(v);\nuse super::Problem;";
    assert_eq!(sibling_imports(text), ["keys", "raw", "expand"]);
}

/// The layout table of `src/lib.rs`: each row's modules (the backticked names of its first
/// cell), in order.
fn layout_table(lib: &str) -> Vec<Vec<String>> {
    let table = lib
        .split("# Layout")
        .nth(1)
        .expect("lib.rs has a layout section");
    let table = table.split("\n//! #").next().unwrap();
    table
        .lines()
        .filter_map(|line| line.strip_prefix("//! | "))
        .filter_map(|row| row.split(" | ").next())
        .map(|cell| {
            cell.split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .filter(|modules| !modules.is_empty())
        .collect()
}

#[test]
fn the_layout_table_of_lib_rs_is_the_layers_tested_here() {
    let lib =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    let table = layout_table(&lib);
    // The first layer is beside the path (the table's prose names it), the last the
    // allocators.
    let tested: Vec<Vec<String>> = LAYERS[1..LAYERS.len() - 1]
        .iter()
        .map(|layer| layer.iter().map(|m| (*m).to_owned()).collect())
        .collect();
    assert_eq!(table, tested, "src/lib.rs's layout table, and LAYERS here");
}
