//! The binary the suite runs: it serves the fixture on the address it is given and says where.
//! (Having a test here also has `cargo test` build the binary, which Switchyard's integration
//! tests hand to the suite.)

use std::{
    io::{BufRead, BufReader},
    process::{Command, Stdio},
};

#[test]
fn the_server_announces_the_url_it_serves() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_switchyard-conformance"))
        .args(["server", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    child.kill().unwrap();
    let _ = child.wait();
    let url = line
        .trim()
        .strip_prefix("conformance fixture listening on ")
        .expect("the announcement");
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    assert!(url.ends_with("/mcp"), "{url}");
}
