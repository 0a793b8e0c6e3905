//! The Landlock ruleset of a sandboxed server, made before the process is forked: the system's
//! directories, its program and working directory readable, the configured paths readable or
//! writable, nothing else. Without network its TCP binds and connects are refused too; and it
//! may neither signal nor reach through abstract Unix sockets processes outside its sandbox.

use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, Ruleset, RulesetAttr, RulesetCreated,
    RulesetCreatedAttr, RulesetError, Scope, path_beneath_rules,
};

use crate::config::SandboxConfig;

/// The newest ABI whose rights are asked for; an older kernel enforces what it knows.
const ABI_WANTED: ABI = ABI::V6;

/// Read (and run) by every program: its libraries, the system's configuration, its own
/// process's files.
const SYSTEM_READ: [&str; 9] = [
    "/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc", "/opt", "/proc",
];

/// Devices every program may read and write.
const DEVICES: [&str; 6] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
];

/// The ruleset for `config`, `program` and `cwd`; `missing` hears of each configured path
/// that does not exist (it cannot be given, and the server will not see it).
pub fn ruleset(
    config: &SandboxConfig,
    program: Option<&Path>,
    cwd: Option<&Path>,
    missing: &mut dyn FnMut(&Path),
) -> Result<RulesetCreated, RulesetError> {
    let all = AccessFs::from_all(ABI_WANTED);
    let read = AccessFs::from_read(ABI_WANTED);
    let mut ruleset = Ruleset::default().handle_access(all)?;
    if !config.network {
        ruleset = ruleset.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)?;
    }
    let scopes: BitFlags<Scope> = Scope::from_all(ABI_WANTED);
    let ruleset = ruleset.scope(scopes)?.create()?;
    let own: Vec<PathBuf> = program
        .into_iter()
        .chain(cwd)
        .map(Path::to_path_buf)
        .collect();
    let existing = |paths: &[PathBuf], missing: &mut dyn FnMut(&Path)| -> Vec<PathBuf> {
        paths
            .iter()
            .filter(|path| {
                let exists = path.exists();
                if !exists {
                    missing(path);
                }
                exists
            })
            .cloned()
            .collect()
    };
    let readable = existing(&config.read, missing);
    let writable = existing(&config.write, missing);
    ruleset
        .add_rules(path_beneath_rules(SYSTEM_READ, read))?
        .add_rules(path_beneath_rules(&own, read))?
        .add_rules(path_beneath_rules(&readable, read))?
        .add_rules(path_beneath_rules(DEVICES, all))?
        .add_rules(path_beneath_rules(&writable, all))
}
