//! What the forked child does to itself before it runs the server's program: its pids
//! cgroup, its own user
//! (and, without network, network) namespace, its resource limits, then Landlock and the
//! seccomp filters, which no-new-privileges keeps for every program it runs. Everything
//! here is made before the fork: between fork and exec the child of a threaded process may
//! only make system calls, not allocate.

use std::{ffi::CString, io};

use landlock::RulesetCreated;
use seccompiler::BpfProgram;

/// One resource limit.
pub type Limit = (libc::__rlimit_resource_t, u64);

/// The child's confinement, ready to apply.
pub struct Confinement {
    /// The `cgroup.procs` of the server's own pids cgroup, joined first.
    pub cgroup: Option<CString>,
    /// The namespaces to unshare (0 for none), and the identity maps written after.
    pub namespaces: libc::c_int,
    pub maps: [(CString, Vec<u8>); 3],
    pub limits: Vec<Limit>,
    pub ruleset: Option<RulesetCreated>,
    pub filters: Vec<BpfProgram>,
}

impl Confinement {
    /// Applies it to the calling process: a forked child, before exec. Any step that fails
    /// fails the start, so the server never runs less confined than reported.
    pub fn apply(&mut self) -> io::Result<()> {
        if let Some(procs) = &self.cgroup {
            write_file(procs, b"0")?;
        }
        if self.namespaces != 0 {
            // SAFETY: unshare takes flags only.
            check(unsafe { libc::unshare(self.namespaces) })?;
            for (path, content) in &self.maps {
                write_file(path, content)?;
            }
        }
        for &(resource, value) in &self.limits {
            let limit = libc::rlimit {
                rlim_cur: value,
                rlim_max: value,
            };
            // SAFETY: `limit` is a valid rlimit for the duration of the call.
            check(unsafe { libc::setrlimit(resource, &limit) })?;
        }
        // SAFETY: PR_SET_NO_NEW_PRIVS takes integers only.
        check(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) })?;
        if let Some(ruleset) = self.ruleset.take() {
            ruleset
                .restrict_self()
                .map_err(|_| io::Error::from(io::ErrorKind::PermissionDenied))?;
        }
        for filter in &self.filters {
            seccompiler::apply_filter(filter)
                .map_err(|_| io::Error::from(io::ErrorKind::PermissionDenied))?;
        }
        Ok(())
    }
}

/// Writes `content` to the file at `path` with plain system calls.
fn write_file(path: &CString, content: &[u8]) -> io::Result<()> {
    // SAFETY: `path` is NUL-terminated; the descriptor is closed before returning.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        check(fd)?;
        let written = libc::write(fd, content.as_ptr().cast(), content.len());
        libc::close(fd);
        if written != content.len() as isize {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

fn check(result: libc::c_int) -> io::Result<()> {
    if result == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}
