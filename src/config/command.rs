//! `switchyard config …`: what a configuration file may hold, told to editors and tools. The
//! JSON Schema it prints is `config::schema`, derived from the types that read the file.

use std::io::Write;

/// `switchyard config COMMAND`.
#[derive(clap::Args, Debug)]
pub struct ConfigArgs {
    #[command(subcommand)]
    pub command: ConfigCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum ConfigCommand {
    /// Print the JSON Schema (draft 2020-12) of the TOML configuration file: every table and
    /// key, with its type, accepted values, range, default and description.
    Schema,
}

/// Runs `args`, writing to standard output.
pub fn run(args: &ConfigArgs) -> std::io::Result<()> {
    match args.command {
        ConfigCommand::Schema => {
            let mut out = std::io::stdout().lock();
            serde_json::to_writer_pretty(&mut out, &super::schema())?;
            writeln!(out)
        }
    }
}
