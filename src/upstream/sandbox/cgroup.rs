//! A sandboxed server's processes counted in a pids cgroup of its own, where the gateway may
//! make one beside itself (cgroup v1's pids hierarchy, or v2 with the pids controller already
//! enabled below the gateway's cgroup). Unlike `RLIMIT_NPROC`, it holds for a server started
//! by root, and counts only the server's own processes. Cgroups of servers that have ended are
//! removed when the next of the same upstream starts (those older than a minute: a new one's
//! process may not have joined it yet).

use std::{
    ffi::CString,
    fs,
    path::{Path, PathBuf},
    time::{SystemTime, UNIX_EPOCH},
};

/// How old an empty cgroup of a server must be to be removed.
const STALE: std::time::Duration = std::time::Duration::from_secs(60);

/// Where the gateway may make cgroups for its servers, if anywhere.
pub fn base() -> Option<PathBuf> {
    let own = fs::read_to_string("/proc/self/cgroup").ok()?;
    let mounts = fs::read_to_string("/proc/self/mountinfo").ok()?;
    let base = candidates(&own, &mounts).into_iter().find(|dir| {
        let probe = dir.join(format!("switchyard-probe-{}", std::process::id()));
        let made = fs::create_dir(&probe).is_ok() && probe.join("pids.max").exists();
        let _ = fs::remove_dir(&probe);
        made
    })?;
    Some(base)
}

/// The directories of the gateway's own cgroup in each hierarchy that can count processes.
fn candidates(own: &str, mounts: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for line in own.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let v1 = controllers.split(',').any(|c| c == "pids");
        let v2 = controllers.is_empty();
        if !(v1 || v2) {
            continue;
        }
        for mount in mounts.lines() {
            let Some((before, after)) = mount.split_once(" - ") else {
                continue;
            };
            let mut after = after.split(' ');
            let (kind, _, options) = (after.next(), after.next(), after.next().unwrap_or(""));
            let pids = kind == Some("cgroup") && options.split(',').any(|o| o == "pids");
            if !((v1 && pids) || (v2 && kind == Some("cgroup2"))) {
                continue;
            }
            let before: Vec<&str> = before.split(' ').collect();
            let (Some(root), Some(point)) = (before.get(3), before.get(4)) else {
                continue;
            };
            let Some(inner) = path.strip_prefix(root.trim_end_matches('/')) else {
                continue;
            };
            let dir = Path::new(point).join(inner.trim_start_matches('/'));
            let enabled = || {
                fs::read_to_string(dir.join("cgroup.subtree_control"))
                    .is_ok_and(|c| c.split_whitespace().any(|c| c == "pids"))
            };
            if v1 || enabled() {
                found.push(dir);
            }
        }
    }
    found
}

/// Makes a cgroup under `base` for a server of `upstream` that may have `processes` at
/// once; the path of its `cgroup.procs`, which the child joins by writing `0` to it.
pub fn make(base: &Path, upstream: &str, processes: u64) -> std::io::Result<CString> {
    let prefix = format!("switchyard-{upstream}-");
    for entry in fs::read_dir(base)?.flatten() {
        let name = entry.file_name();
        let ours = (name.to_string_lossy().strip_prefix(&prefix))
            .is_some_and(|stamp| !stamp.is_empty() && stamp.bytes().all(|b| b.is_ascii_digit()));
        // Not one made a moment ago, whose process may not have joined it yet.
        let old = (entry.metadata().and_then(|m| m.modified()))
            .is_ok_and(|made| made.elapsed().is_ok_and(|age| age > STALE));
        if ours && old {
            // Fails, as it should, while a process is in it.
            let _ = fs::remove_dir(entry.path());
        }
    }
    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let dir = base.join(format!("{prefix}{stamp}"));
    fs::create_dir(&dir)?;
    fs::write(dir.join("pids.max"), processes.to_string())?;
    CString::new(
        dir.join("cgroup.procs")
            .into_os_string()
            .into_encoded_bytes(),
    )
    .map_err(std::io::Error::other)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gateways_own_cgroup_is_found_in_a_pids_hierarchy_or_an_enabled_unified_one() {
        let own = "12:pids:/services/gw\n4:memory:/x\n0::/user.slice/gw.service\n";
        let mounts = "\
31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n\
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n\
40 31 0:37 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n\
41 31 0:38 /services /sys/fs/cgroup/nested rw - cgroup cgroup rw,pids\n";
        assert_eq!(
            candidates(own, mounts),
            [
                PathBuf::from("/sys/fs/cgroup/pids/services/gw"),
                PathBuf::from("/sys/fs/cgroup/nested/gw")
            ]
        );
        // A unified hierarchy counts only where pids is enabled below the gateway's cgroup
        // (which this test's paths do not have).
        let unified = "0::/a\n";
        let mounts = "30 23 0:27 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        assert!(candidates(unified, mounts).is_empty());
    }
}
