//! A reload takes every section of the file: each is applied at once or named as needing a
//! restart. The sections are read off the configuration's own type (the keys serde accepts at
//! the top of the file), so a section added there without a rule here fails this test.

use std::path::Path;

use super::{keep_fixed, sections_changed};
use crate::config::{Config, ProcessVars, file_sections, parse_str};

/// How a reload takes a section of the configuration file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Taken {
    /// Applied at once: the new snapshot carries it to every request that starts after.
    Live,
    /// Kept as it runs, and named as needing a restart.
    Restart,
    /// Compared upstream by upstream: added, removed and changed ones are started and retired.
    Upstreams,
    /// Applied at once but for the keys `keep_fixed` names as needing a restart.
    LiveButListeners,
}

/// Every top-level section of the configuration file, and how a reload takes it.
const SECTIONS: &[(&str, Taken)] = &[
    ("server", Taken::LiveButListeners),
    ("catalog", Taken::Live),
    ("upstream_defaults", Taken::Upstreams),
    ("upstreams", Taken::Upstreams),
    ("oauth", Taken::Restart),
    ("admin", Taken::Restart),
    ("auth", Taken::Live),
    ("limits", Taken::Live),
    ("policy", Taken::Live),
    ("endpoints", Taken::Live),
    ("store", Taken::Restart),
    ("audit", Taken::Restart),
    ("telemetry", Taken::Restart),
    ("quota", Taken::Live),
    ("guardrail", Taken::Live),
];

const BASE: &str = "[upstreams.demo]\ncommand = \"demo\"\n";

/// For each section applied at once or at a restart, a change of it (added to `BASE`).
const CHANGES: &[(&str, &str)] = &[
    ("server", "[server]\nsession_idle_timeout_seconds = 60\n"),
    ("catalog", "[catalog]\npage_size = 10\n"),
    ("oauth", "[oauth]\nclient_name = \"Other\"\n"),
    ("admin", "[admin]\nallow_commands = true\n"),
    (
        "auth",
        "[auth]\nanonymous = true\n[auth.api_keys.ci]\nsha256 = \"0000000000000000000000000000000000000000000000000000000000000000\"\n",
    ),
    ("limits", "[limits]\nmax_json_depth = 10\n"),
    (
        "policy",
        "[[policy]]\nname = \"hide\"\ndeny = { upstreams = [\"demo\"] }\n",
    ),
    ("endpoints", "[endpoints.ro]\nupstreams = [\"demo\"]\n"),
    ("store", "[store]\nkind = \"memory\"\n"),
    ("audit", "[audit]\nstdout = true\n"),
    (
        "telemetry",
        "[telemetry]\notlp_endpoint = \"http://127.0.0.1:4318\"\n",
    ),
    ("quota", "[[quota]]\nname = \"q\"\ndaily = 10\n"),
    (
        "guardrail",
        "[[guardrail]]\ndetect = [\"secrets\"]\naction = \"block\"\n",
    ),
];

fn load(text: &str) -> Config {
    parse_str(
        Path::new("/nonexistent/switchyard.toml"),
        text,
        &ProcessVars,
    )
    .unwrap_or_else(|error| panic!("{error}\n{text}"))
}

#[test]
fn every_section_of_the_file_has_a_rule() {
    let ruled: Vec<&str> = SECTIONS.iter().map(|(name, _)| *name).collect();
    let sections = file_sections();
    assert!(!sections.is_empty());
    for section in &sections {
        assert!(
            ruled.contains(section),
            "`[{section}]` has no rule in reload::SECTIONS: applied at once, or named as \
             needing a restart?"
        );
    }
    for name in &ruled {
        assert!(
            sections.contains(name),
            "`{name}` is no section of the file"
        );
    }
}

#[test]
fn a_change_of_any_section_is_applied_or_named_as_needing_a_restart() {
    let old = load(BASE);
    for (section, taken) in SECTIONS {
        if *taken == Taken::Upstreams {
            continue;
        }
        let change = CHANGES
            .iter()
            .find(|(name, _)| name == section)
            .unwrap_or_else(|| panic!("no change of `[{section}]` to try"))
            .1;
        let mut next = load(&format!("{BASE}{change}"));
        let restart = keep_fixed(&old, &mut next, &None);
        let applied = sections_changed(&old, &next);
        let named = restart
            .iter()
            .any(|key| key.split('.').next() == Some(*section));
        match taken {
            Taken::Restart => {
                assert!(
                    named,
                    "`[{section}]` is not named as needing a restart: {restart:?}"
                );
                assert!(applied.is_empty(), "`[{section}]` applied: {applied:?}");
            }
            Taken::Live | Taken::LiveButListeners => {
                // (Some change others with them: `[auth]` the default `[limits]`.)
                assert!(
                    applied.contains(section),
                    "`[{section}]` is not applied: {applied:?}"
                );
                assert!(
                    !named,
                    "`[{section}]` named as needing a restart: {restart:?}"
                );
            }
            Taken::Upstreams => unreachable!(),
        }
    }
}
