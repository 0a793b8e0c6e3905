//! What this kernel offers a sandbox, found out once: its Landlock ABI, seccomp filters,
//! whether an unprivileged process may have user and network namespaces of its own, and where
//! the gateway may make pids cgroups.

use std::{path::PathBuf, sync::OnceLock};

/// The kernel's sandboxing features.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kernel {
    /// The Landlock ABI version; 0 where Landlock is not built in or not enabled.
    pub landlock_abi: i32,
    /// Whether seccomp filters can be installed (and this architecture is one they are
    /// written for).
    pub seccomp: bool,
    /// Whether an unprivileged process may enter user and network namespaces of its own.
    pub namespaces: bool,
    /// Where cgroups counting a server's processes can be made.
    pub pids_cgroup: Option<PathBuf>,
    /// Whether the gateway runs as root, whose processes `RLIMIT_NPROC` does not count.
    pub root: bool,
}

/// This kernel's features, probed on first use.
pub fn kernel() -> &'static Kernel {
    static KERNEL: OnceLock<Kernel> = OnceLock::new();
    KERNEL.get_or_init(|| {
        let kernel = Kernel {
            landlock_abi: landlock_abi(),
            seccomp: seccomp() && super::filter::arch().is_some(),
            namespaces: namespaces(),
            pids_cgroup: super::cgroup::base(),
            // SAFETY: geteuid cannot fail.
            root: unsafe { libc::geteuid() } == 0,
        };
        tracing::debug!(?kernel, "the kernel's sandboxing features");
        kernel
    })
}

fn landlock_abi() -> i32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: the version query reads no memory: a null attribute and a size of 0.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    i32::try_from(version).unwrap_or(0).max(0)
}

fn seccomp() -> bool {
    // SAFETY: PR_GET_SECCOMP takes no pointer; it fails with EINVAL without seccomp.
    unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) >= 0 }
}

/// Whether a child may unshare user and network namespaces. A process with threads cannot
/// enter a new user namespace itself, so a forked child tries and reports by its exit status.
fn namespaces() -> bool {
    // SAFETY: between fork and _exit the child calls only async-signal-safe functions
    // (unshare, _exit), as a child of a threaded process must.
    unsafe {
        match libc::fork() {
            -1 => false,
            0 => {
                let entered = libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) == 0;
                libc::_exit(if entered { 0 } else { 1 })
            }
            child => {
                let mut status = 0;
                while libc::waitpid(child, &mut status, 0) == -1 {
                    if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                        return false;
                    }
                }
                libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
            }
        }
    }
}
