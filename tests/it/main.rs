//! Switchyard's integration tests: one binary, real upstream servers, real clients.

mod catalog;
mod cli;
mod fixtures;
mod harness;
mod notifications;
mod relay;
mod routing;
mod sessions;
