//! Switchyard tried as an attacker would: each test is one attack on the default
//! configuration (or the one an operator would write), and what must hold against it. The
//! list is the one in SECURITY.md.

mod admin;
mod arguments;
mod discovery;
mod hygiene;
mod links;
mod sessions;
mod uris;
