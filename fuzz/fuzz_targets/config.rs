//! The configuration loader, both forms: any text, read as a TOML file or (when it starts with
//! `{`) as an MCP client's `mcpServers` JSON, is a configuration or a list of problems, never
//! a panic. Placeholders read an empty environment, and files from a directory that does not
//! exist.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use switchyard::config::{self, Vars};

struct NoVars;

impl Vars for NoVars {
    fn env(&self, _name: &str) -> Option<String> {
        None
    }

    fn self_exe(&self) -> Option<String> {
        Some("/usr/bin/switchyard".into())
    }
}

fuzz_target!(|text: &str| {
    // No extension: the form is told by the first character, as for `-c FILE`.
    let path = Path::new("/nonexistent/switchyard-fuzz/config");
    if let Ok(config) = config::parse_str(path, text, &NoVars) {
        let _ = config.warnings();
    }
});
