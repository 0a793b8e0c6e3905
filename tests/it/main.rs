//! Switchyard's integration tests: one binary, real upstream servers, real clients.

mod attacks;
mod auth;
mod bench;
mod browser;
mod catalog;
mod cli;
mod conformance;
mod deps;
mod fixtures;
mod harness;
mod headers;
mod interop;
mod layers;
mod limits;
mod notifications;
mod oauth;
mod operate;
mod passthrough;
mod policy;
mod relay;
mod replicas;
mod resilience;
mod routing;
mod sessions;
mod transports;
mod users;
