"""The seccomp profile of a container under gVisor (runsc), applied by gVisor
inside its sandbox (`--oci-seccomp`, scripts/ensure-gvisor.sh).

Docker's default profile cannot be used there: it answers `clone3` with
ENOSYS so that glibc falls back to `clone`, but runsc turns every refusal of
an OCI profile into EPERM (google/gvisor#14688, runsc 20221219 as Debian 12
ships it), and glibc's `pthread_create` gives up on EPERM: no thread starts,
not a Python `threading.Thread`, not a JVM, Node, the `go` command or rustc.
gVisor itself answers `clone3` with ENOSYS, so this profile lets it through
and refuses what a program graded here never needs, as Docker's profile does
under runc: namespaces (`unshare`, `setns`, `clone` with a namespace flag),
mounts, keyrings, BPF, perf, ptrace and reading other processes' memory, the
kernel log, modules, reboot, clocks, swap, quotas, NUMA policy and the
userfaultfd and file-handle calls. Under gVisor these reach gVisor's kernel,
not the host's, which is confined by gVisor's own, stricter filter: this
profile is the second wall, as Docker's is under runc.
"""

import json

__all__ = ["GVISOR_SECCOMP", "gvisor_seccomp_option"]

_REFUSED = (
    # namespaces and mounts
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "fsopen", "fsmount", "fspick", "open_tree",
    "move_mount", "mount_setattr",
    # keyrings, BPF, perf, tracing and other processes' memory
    "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "ptrace", "process_vm_readv", "process_vm_writev",
    "kcmp", "userfaultfd", "fanotify_init", "open_by_handle_at", "name_to_handle_at", "lookup_dcookie",
    # the kernel itself: its log, modules, reboot, clocks, swap, quotas, I/O ports, NUMA policy
    "syslog", "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "create_module",
    "get_kernel_syms", "query_module", "reboot", "acct", "settimeofday", "clock_settime", "clock_adjtime",
    "adjtimex", "swapon", "swapoff", "quotactl", "vhangup", "iopl", "ioperm", "mbind", "set_mempolicy",
    "move_pages", "uselib", "ustat", "sysfs", "_sysctl", "nfsservctl",
)
# CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET: a `clone` asking for any is refused.
_NAMESPACE_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)

GVISOR_SECCOMP: dict[str, object] = {
    "defaultAction": "SCMP_ACT_ALLOW",
    "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32", "SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"],
    "syscalls": [
        {"names": list(_REFUSED), "action": "SCMP_ACT_ERRNO"},
        *({"names": ["clone"], "action": "SCMP_ACT_ERRNO",
           "args": [{"index": 0, "value": flag, "valueTwo": flag, "op": "SCMP_CMP_MASKED_EQ"}]}
          for flag in _NAMESPACE_FLAGS),
    ],
}


def gvisor_seccomp_option() -> str:
    """The `security_opt` entry that gives a container this profile."""
    return "seccomp=" + json.dumps(GVISOR_SECCOMP, separators=(",", ":"))
