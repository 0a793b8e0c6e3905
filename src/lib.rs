//! Switchyard: an MCP gateway.
pub mod catalog;
pub mod config;
pub mod names;
