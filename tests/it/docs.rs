//! The documentation stays navigable: every relative link and image in README.md and in the
//! book's chapters (docs/src/*.md) names a file that exists, every `#anchor` into a markdown
//! file names one of its headings, every chapter is in SUMMARY.md, and README.md keeps the
//! two commands a newcomer runs (CI runs the second). Reads files only: no network.

use std::{
    collections::HashSet,
    path::{Path, PathBuf},
};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every chapter of the book, in a stable order.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut chapters: Vec<PathBuf> = std::fs::read_dir(root.join("docs/src"))
        .expect("docs/src")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    chapters.sort();
    let mut documents = vec![root.join("README.md")];
    documents.extend(chapters);
    documents
}

/// The text with fenced code blocks and inline code spans blanked out, so that what looks
/// like a link inside code is not taken for one. A code span may go on over the lines of its
/// paragraph; a blank line ends it.
fn prose(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut fenced = false;
    let mut in_code = false;
    for line in text.split_inclusive('\n') {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            out.push('\n');
            continue;
        }
        if fenced {
            out.push('\n');
            continue;
        }
        if line.trim().is_empty() {
            in_code = false;
        }
        for ch in line.chars() {
            if ch == '`' {
                in_code = !in_code;
                out.push(' ');
            } else if in_code && ch != '\n' {
                out.push(' ');
            } else {
                out.push(ch);
            }
        }
    }
    out
}

/// The targets of the inline links and images of `text` (`[text](target)`,
/// `![alt](target "title")`), and of reference definitions (`[name]: target`).
fn link_targets(text: &str) -> Vec<String> {
    let prose = prose(text);
    let mut targets = Vec::new();
    let mut rest = prose.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let end = after.find(')').unwrap_or(after.len());
        let target = after[..end].split_whitespace().next().unwrap_or("");
        targets.push(target.trim_matches(['<', '>']).to_string());
        rest = &after[end..];
    }
    for line in prose.lines() {
        let line = line.trim_start();
        if let Some(close) = line.strip_prefix('[').and_then(|l| l.find("]: ")) {
            let target = line[close + 4..].split_whitespace().next().unwrap_or("");
            targets.push(target.to_string());
        }
    }
    targets
}

/// The anchor a heading gets: its words in lower case joined by `-`, punctuation dropped
/// (mdBook's rule, which is GitHub's for the headings written here); a repeated heading gets
/// `-1`, `-2`….
fn anchors(text: &str) -> HashSet<String> {
    let mut anchors = HashSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if fenced || !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let slug = slug(&heading_text(&line[hashes..]));
        let mut anchor = slug.clone();
        let mut repeat = 0;
        while !anchors.insert(anchor.clone()) {
            repeat += 1;
            anchor = format!("{slug}-{repeat}");
        }
    }
    anchors
}

/// A heading's text as a reader sees it: links as their text, code without its backticks.
fn heading_text(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading.trim();
    while let Some(open) = rest.find('[') {
        let Some(mid) = rest[open..].find("](") else {
            break;
        };
        let Some(close) = rest[open + mid..].find(')') else {
            break;
        };
        text.push_str(&rest[..open]);
        text.push_str(&rest[open + 1..open + mid]);
        rest = &rest[open + mid + close + 1..];
    }
    text.push_str(rest);
    text.replace('`', "")
}

fn slug(text: &str) -> String {
    text.chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c.to_lowercase().next().unwrap_or(c))
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// Every problem with the relative links of `document`: a target that does not exist, or an
/// anchor that names no heading of the markdown file it points into.
fn broken_links(document: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(document).expect("a document");
    let dir = document.parent().expect("a directory");
    let mut problems = Vec::new();
    for target in link_targets(&text) {
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (path, anchor) = match target.split_once('#') {
            Some((path, anchor)) => (path, Some(anchor)),
            None => (target.as_str(), None),
        };
        let file = if path.is_empty() {
            document.to_path_buf()
        } else {
            dir.join(path)
        };
        if !file.exists() {
            problems.push(format!("`{target}`: {} does not exist", file.display()));
            continue;
        }
        let Some(anchor) = anchor else { continue };
        if file.extension().is_some_and(|ext| ext == "md") {
            let headings = anchors(&std::fs::read_to_string(&file).expect("a markdown file"));
            if !headings.contains(anchor) {
                problems.push(format!(
                    "`{target}`: no heading of {} has that anchor",
                    file.display()
                ));
            }
        }
    }
    for line in text.lines() {
        let Some(include) = line.trim().strip_prefix("{{#include ") else {
            continue;
        };
        let path = include.trim_end_matches("}}").trim();
        let path = path.split(':').next().unwrap_or(path);
        if !dir.join(path).exists() {
            problems.push(format!("`{line}`: {path} does not exist"));
        }
    }
    problems
}

#[test]
fn every_relative_link_of_the_readme_and_the_book_resolves() {
    let root = root();
    let mut problems = Vec::new();
    let mut links = 0;
    for document in documents(&root) {
        links += link_targets(&std::fs::read_to_string(&document).unwrap()).len();
        for problem in broken_links(&document) {
            problems.push(format!(
                "{}: {problem}",
                document.strip_prefix(&root).unwrap().display()
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
    assert!(
        links > 50,
        "only {links} links found: the link reader is broken"
    );
}

#[test]
fn every_chapter_is_in_the_summary() {
    let src = root().join("docs/src");
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).unwrap();
    let listed: HashSet<String> = link_targets(&summary).into_iter().collect();
    for document in documents(&root()).into_iter().skip(1) {
        let name = document.file_name().unwrap().to_string_lossy().into_owned();
        if name != "SUMMARY.md" {
            assert!(
                listed.contains(&name),
                "docs/src/{name} is not in SUMMARY.md"
            );
        }
    }
}

#[test]
fn the_readme_keeps_the_two_commands_a_newcomer_runs() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    // .ci/run runs the test command written here; the quick start's first command builds and
    // runs the gateway on conf/.
    for command in ["cargo run --release", "cargo test"] {
        assert!(
            readme.contains(&format!("```sh\n{command}\n```")),
            "README.md no longer has `{command}` as a command block of its own"
        );
    }
    let lines = readme.lines().count();
    assert!(
        lines <= 250,
        "README.md has {lines} lines: move the detail into docs/src/"
    );
}

#[test]
fn the_link_check_finds_a_missing_file_and_a_missing_anchor() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("other.md"),
        "# Other\n\n## A `code` heading\n",
    )
    .unwrap();
    let page = dir.path().join("page.md");
    std::fs::write(
        &page,
        "# Page\n\n[fine](other.md#a-code-heading) [here](#page) [web](https://example.com)\n\
         [gone](missing.md) [lost](other.md#nowhere) `[code](not-a-link.md)` `a span\n\
         over [lines](nor-this.md)`\n\n```sh\n[in a block](not-a-link-either.md)\n```\n",
    )
    .unwrap();
    let problems = broken_links(&page);
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert!(problems[0].contains("missing.md"), "{problems:#?}");
    assert!(problems[1].contains("other.md#nowhere"), "{problems:#?}");
}
