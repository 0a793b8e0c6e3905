//! `switchyard import` on any file a client could hold: read as each client's file, whatever
//! its names, values and comments, the configuration written holds exactly the servers found
//! and nothing else (the importer reads its own output back and says so when it would not),
//! and nothing panics.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use switchyard::import::{Client, configuration_of};

fuzz_target!(|bytes: &[u8]| {
    let home = Path::new("/nonexistent/switchyard-fuzz/home");
    for client in Client::ALL {
        for file in [".mcp.json", ".vscode/settings.json"] {
            let path = home.join("project").join(file);
            if let Err(why) = configuration_of(client, &path, bytes, home) {
                panic!("{client:?}: the configuration written would not hold what was found: {why}");
            }
        }
    }
});
