//! The seccomp filters of a sandboxed server: system calls a tool server never needs
//! (tracing other processes, mounting, loading kernel code, new namespaces, keyrings,
//! io_uring, which other filters cannot see into) fail with `EPERM`; `clone3`, whose flags a
//! filter cannot read, fails with `ENOSYS`, so that the C library falls back to `clone`, whose
//! namespace flags are refused; and without network, `socket` fails.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// This machine's architecture, where the filters are written for it.
pub fn arch() -> Option<TargetArch> {
    TargetArch::try_from(std::env::consts::ARCH).ok()
}

/// System calls refused outright.
const REFUSED: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_setns,
    libc::SYS_unshare,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_fanotify_init,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_syslog,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
    libc::SYS_vhangup,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_iopl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_ioperm,
];

/// `clone` flags that make namespaces.
const NAMESPACES: [libc::c_int; 7] = [
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWNS,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWCGROUP,
];

/// The programs to install, in order.
pub fn programs(arch: TargetArch, network: bool) -> Result<Vec<BpfProgram>, seccompiler::Error> {
    let mut refused: BTreeMap<i64, Vec<SeccompRule>> =
        REFUSED.iter().map(|&call| (call, Vec::new())).collect();
    let namespace_flags = NAMESPACES
        .iter()
        .map(|&flag| {
            let flag = flag as u64;
            let condition = SeccompCondition::new(
                0,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::MaskedEq(flag),
                flag,
            )?;
            SeccompRule::new(vec![condition])
        })
        .collect::<Result<Vec<_>, _>>()?;
    refused.insert(libc::SYS_clone, namespace_flags);
    if !network {
        refused.insert(libc::SYS_socket, Vec::new());
    }
    let eperm = SeccompAction::Errno(libc::EPERM as u32);
    let refused = SeccompFilter::new(refused, SeccompAction::Allow, eperm, arch)?;
    let clone3 = BTreeMap::from([(libc::SYS_clone3, Vec::new())]);
    let enosys = SeccompAction::Errno(libc::ENOSYS as u32);
    let clone3 = SeccompFilter::new(clone3, SeccompAction::Allow, enosys, arch)?;
    Ok(vec![refused.try_into()?, clone3.try_into()?])
}
