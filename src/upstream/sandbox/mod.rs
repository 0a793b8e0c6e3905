//! The sandbox of a stdio server (`[upstreams.NAME.sandbox]`), on Linux without containers:
//! Landlock confines the paths it may read and write (`paths`), a seccomp filter refuses the
//! system calls a tool server never needs (`filter`), no-new-privileges keeps both across
//! every program it runs, user and network namespaces of its own make its process count its
//! own and, without network, leave it no interface to reach (`kernel` finds out which of
//! these the kernel offers), and resource limits cap its memory and open files, and a pids
//! cgroup (`cgroup`) or `RLIMIT_NPROC` its processes.
//! What the kernel cannot enforce is said at start and in `/api/status`; with `required`,
//! the server is not started at all. The child applies it to itself between fork and exec
//! (`child`).

mod cgroup;
mod child;
mod filter;
mod kernel;
mod paths;

use std::{ffi::CString, path::Path};

use serde::Serialize;

use self::child::{Confinement, Limit};
use crate::config::SandboxConfig;

pub use kernel::{Kernel, kernel};

/// What a sandbox enforces on this kernel, and what it cannot.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    pub enforced: Vec<&'static str>,
    pub missing: Vec<&'static str>,
}

impl Report {
    /// What `config` comes to on `kernel`.
    pub fn of(config: &SandboxConfig, kernel: &Kernel) -> Report {
        let mut report = Report::default();
        let mut feature = |present: bool, name: &'static str| {
            if present {
                report.enforced.push(name);
            } else {
                report.missing.push(name);
            }
        };
        feature(kernel.landlock_abi >= 1, "paths (Landlock)");
        feature(kernel.seccomp, "system call filter (seccomp)");
        if !config.network {
            feature(kernel.seccomp, "no sockets (seccomp)");
            feature(kernel.namespaces, "network namespace");
            feature(kernel.landlock_abi >= 4, "no TCP (Landlock)");
        }
        feature(
            kernel.landlock_abi >= 6,
            "no signals or abstract sockets outside (Landlock)",
        );
        if config.processes.is_some() {
            match counting(kernel) {
                Some(Counting::Cgroup) => feature(true, "processes (pids cgroup)"),
                Some(Counting::Namespace) => feature(true, "processes (user namespace)"),
                None => feature(false, "processes (no pids cgroup, and root is not counted)"),
            }
        }
        report.enforced.push("no new privileges");
        if config.memory_bytes.is_some()
            || config.processes.is_some()
            || config.open_files.is_some()
        {
            report.enforced.push("resource limits");
        }
        report
    }
}

/// How a server's processes are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Counting {
    /// In a pids cgroup of its own.
    Cgroup,
    /// By `RLIMIT_NPROC`, in a user namespace of its own (so only its processes count).
    Namespace,
}

fn counting(kernel: &Kernel) -> Option<Counting> {
    if kernel.pids_cgroup.is_some() {
        Some(Counting::Cgroup)
    } else if kernel.namespaces && !kernel.root {
        Some(Counting::Namespace)
    } else {
        None
    }
}

/// Confines the process `command` will start, as `config` says, as far as the kernel allows.
/// `program` is the program it runs, `cwd` its working directory (both readable).
pub fn confine(
    command: &mut tokio::process::Command,
    upstream: &str,
    config: &SandboxConfig,
    own: (Option<&Path>, Option<&Path>),
) -> std::io::Result<()> {
    confine_on(kernel(), command, upstream, config, own)
}

fn confine_on(
    kernel: &Kernel,
    command: &mut tokio::process::Command,
    upstream: &str,
    config: &SandboxConfig,
    (program, cwd): (Option<&Path>, Option<&Path>),
) -> std::io::Result<()> {
    let report = Report::of(config, kernel);
    if !report.missing.is_empty() {
        let missing = report.missing.join(", ");
        if config.required {
            return Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                format!("its sandbox is required, and this kernel cannot enforce: {missing}"),
            ));
        }
        tracing::warn!(
            upstream,
            missing,
            "the kernel cannot enforce all of this server's sandbox; it runs with the rest"
        );
    }
    let mut confinement = confinement(config, kernel, (program, cwd), upstream)?;
    // SAFETY: `apply` makes system calls only; everything it uses was made above.
    unsafe {
        command.pre_exec(move || confinement.apply());
    }
    Ok(())
}

fn confinement(
    config: &SandboxConfig,
    kernel: &Kernel,
    (program, cwd): (Option<&Path>, Option<&Path>),
    upstream: &str,
) -> std::io::Result<Confinement> {
    let sandbox_error = |what: &str, e: &dyn std::fmt::Display| {
        std::io::Error::other(format!("cannot prepare its sandbox ({what}): {e}"))
    };
    let ruleset = if kernel.landlock_abi >= 1 {
        let mut missing = |path: &Path| {
            tracing::warn!(upstream, path = %path.display(), "a path of the sandbox does not exist; the server cannot use it");
        };
        Some(
            paths::ruleset(config, program, cwd, &mut missing)
                .map_err(|e| sandbox_error("Landlock", &e))?,
        )
    } else {
        None
    };
    let filters = match filter::arch().filter(|_| kernel.seccomp) {
        Some(arch) => {
            filter::programs(arch, config.network).map_err(|e| sandbox_error("seccomp", &e))?
        }
        None => Vec::new(),
    };
    let counting = config.processes.and_then(|n| Some((n, counting(kernel)?)));
    let cgroup = match (counting, &kernel.pids_cgroup) {
        (Some((processes, Counting::Cgroup)), Some(base)) => {
            Some(cgroup::make(base, upstream, processes).map_err(|e| sandbox_error("cgroup", &e))?)
        }
        _ => None,
    };
    let mut namespaces = 0;
    let counted_in_namespace = matches!(counting, Some((_, Counting::Namespace)));
    if kernel.namespaces && (counted_in_namespace || !config.network) {
        namespaces = libc::CLONE_NEWUSER;
        if !config.network {
            namespaces |= libc::CLONE_NEWNET;
        }
    }
    Ok(Confinement {
        cgroup,
        namespaces,
        maps: identity_maps(),
        limits: limits(config),
        ruleset,
        filters,
    })
}

/// The user namespace's maps: the user stays who they are, and cannot take other groups.
fn identity_maps() -> [(CString, Vec<u8>); 3] {
    // SAFETY: getuid and getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let path = |name: &str| CString::new(format!("/proc/self/{name}")).unwrap_or_default();
    [
        (path("setgroups"), b"deny".to_vec()),
        (path("uid_map"), format!("{uid} {uid} 1").into_bytes()),
        (path("gid_map"), format!("{gid} {gid} 1").into_bytes()),
    ]
}

fn limits(config: &SandboxConfig) -> Vec<Limit> {
    let mut limits = vec![(libc::RLIMIT_CORE, 0)];
    if let Some(bytes) = config.memory_bytes {
        limits.push((libc::RLIMIT_DATA, bytes));
    }
    if let Some(processes) = config.processes {
        limits.push((libc::RLIMIT_NPROC, processes));
    }
    if let Some(files) = config.open_files {
        limits.push((libc::RLIMIT_NOFILE, files));
    }
    limits
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(network: bool, processes: Option<u64>) -> SandboxConfig {
        SandboxConfig {
            read: Vec::new(),
            write: Vec::new(),
            network,
            memory_bytes: None,
            processes,
            open_files: None,
            required: false,
        }
    }

    #[test]
    fn what_the_kernel_lacks_is_reported_missing_and_only_what_was_asked() {
        let full = Kernel {
            landlock_abi: 7,
            seccomp: true,
            namespaces: true,
            pids_cgroup: None,
            root: false,
        };
        let report = Report::of(&config(false, Some(8)), &full);
        assert!(report.missing.is_empty(), "{report:?}");
        assert!(report.enforced.contains(&"network namespace"));

        assert!(report.enforced.contains(&"processes (user namespace)"));
        let as_root = Kernel {
            root: true,
            ..full.clone()
        };
        let report = Report::of(&config(true, Some(8)), &as_root);
        assert_eq!(
            report.missing,
            ["processes (no pids cgroup, and root is not counted)"]
        );
        let with_cgroup = Kernel {
            pids_cgroup: Some("/sys/fs/cgroup/pids".into()),
            ..as_root
        };
        let report = Report::of(&config(true, Some(8)), &with_cgroup);
        assert!(report.missing.is_empty(), "{report:?}");
        assert!(report.enforced.contains(&"processes (pids cgroup)"));

        let old = Kernel {
            landlock_abi: 3,
            seccomp: true,
            namespaces: false,
            pids_cgroup: None,
            root: false,
        };
        let report = Report::of(&config(false, Some(8)), &old);
        assert_eq!(
            report.missing,
            [
                "network namespace",
                "no TCP (Landlock)",
                "no signals or abstract sockets outside (Landlock)",
                "processes (no pids cgroup, and root is not counted)"
            ]
        );
        let report = Report::of(&config(true, None), &old);
        assert_eq!(
            report.missing,
            ["no signals or abstract sockets outside (Landlock)"]
        );
        let none = Kernel {
            landlock_abi: 0,
            seccomp: false,
            namespaces: false,
            pids_cgroup: None,
            root: false,
        };
        let report = Report::of(&config(true, None), &none);
        assert_eq!(
            report.missing,
            [
                "paths (Landlock)",
                "system call filter (seccomp)",
                "no signals or abstract sockets outside (Landlock)"
            ]
        );
        assert_eq!(report.enforced, ["no new privileges"]);
    }

    #[test]
    fn a_required_sandbox_the_kernel_cannot_enforce_does_not_start() {
        let lacking = Kernel {
            landlock_abi: 0,
            seccomp: true,
            namespaces: true,
            pids_cgroup: None,
            root: false,
        };
        let required = SandboxConfig {
            required: true,
            ..config(false, None)
        };
        let mut command = tokio::process::Command::new("true");
        let error = confine_on(&lacking, &mut command, "files", &required, (None, None))
            .expect_err("refused");
        assert_eq!(error.kind(), std::io::ErrorKind::Unsupported);
        assert!(
            error.to_string().contains("paths (Landlock)")
                && error.to_string().contains("no TCP (Landlock)"),
            "{error}"
        );
    }
}
