package platformtest

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/seccomp/*.json from the generator")

// The runtime default seccomp profile: the one Docker applies to every
// container (moby's profiles/seccomp/default.json) and containerd and
// CRI-O apply as Kubernetes' RuntimeDefault. The profile is not vendored:
// dockerProfile builds, in the OCI runtime spec's form runc reads, what it
// resolves to for one architecture and one capability set, as moby's
// seccomp.GetDefaultProfile does at container start. The semantics below
// were read from moby's default.json (2025):
//
//   - every syscall not allowed fails with EPERM (defaultAction ERRNO,
//     defaultErrnoRet 1);
//   - a fixed allowlist, which includes landlock_create_ruleset,
//     landlock_add_rule, landlock_restrict_self and seccomp: a kit may
//     stack Landlock and a seccomp filter of its own inside a container;
//   - socket for every family but AF_VSOCK (40); personality for the
//     values 0, 8, 0x20000, 0x20008 and 0xffffffff only;
//   - ptrace, process_vm_readv and process_vm_writev allowed (kernel 4.8
//     and later), as are kill and tgkill;
//   - per-architecture additions (arch_prctl and modify_ldt on x86_64; the
//     arm cache and TLS calls on aarch64);
//   - capability-conditional rules: with CAP_SYS_ADMIN, mount, unshare,
//     setns, clone with any flags, clone3 and the new mount API; without
//     it (Docker's default set), clone only when none of the namespace
//     flags CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET
//     (mask 0x7e020000) is set, and clone3 fails with ENOSYS (38) so that
//     libcs fall back to clone; chroot with CAP_SYS_CHROOT; ptrace's
//     friends kcmp, pidfd_getfd and process_madvise with CAP_SYS_PTRACE;
//     and so on for the capabilities Docker does not grant.
//
// The generated files under testdata/seccomp are checked against this
// generator by TestRuntimeDefaultSeccomp, and their effect inside a runc
// container by the platform matrix (platform_test.go): a namespace the
// kit asks for is refused, Landlock and seccomp filters install.

// dockerAllow is the unconditional allowlist, for every architecture.
// Names a kernel or libseccomp does not know are skipped by runc.
var dockerAllow = strings.Fields(`
accept accept4 access adjtimex alarm bind brk capget capset chdir chmod chown chown32
clock_adjtime clock_adjtime64 clock_getres clock_getres_time64 clock_gettime clock_gettime64
clock_nanosleep clock_nanosleep_time64 close close_range connect copy_file_range creat
dup dup2 dup3 epoll_create epoll_create1 epoll_ctl epoll_ctl_old epoll_pwait epoll_pwait2
epoll_wait epoll_wait_old eventfd eventfd2 execve execveat exit exit_group
faccessat faccessat2 fadvise64 fadvise64_64 fallocate fanotify_mark fchdir fchmod fchmodat
fchown fchown32 fchownat fcntl fcntl64 fdatasync fgetxattr flistxattr flock fork
fremovexattr fsetxattr fstat fstat64 fstatat64 fstatfs fstatfs64 fsync ftruncate ftruncate64
futex futex_time64 futex_waitv futimesat getcpu getcwd getdents getdents64
getegid getegid32 geteuid geteuid32 getgid getgid32 getgroups getgroups32 getitimer
getpeername getpgid getpgrp getpid getppid getpriority getrandom getresgid getresgid32
getresuid getresuid32 getrlimit get_robust_list getrusage getsid getsockname getsockopt
get_thread_area gettid gettimeofday getuid getuid32 getxattr
inotify_add_watch inotify_init inotify_init1 inotify_rm_watch
io_cancel ioctl io_destroy io_getevents io_pgetevents io_pgetevents_time64 ioprio_get
ioprio_set io_setup io_submit io_uring_enter io_uring_register io_uring_setup ipc kill
landlock_add_rule landlock_create_ruleset landlock_restrict_self
lchown lchown32 lgetxattr link linkat listen listxattr llistxattr _llseek lremovexattr
lseek lsetxattr lstat lstat64 madvise membarrier memfd_create memfd_secret mincore
mkdir mkdirat mknod mknodat mlock mlock2 mlockall mmap mmap2 mprotect
mq_getsetattr mq_notify mq_open mq_timedreceive mq_timedreceive_time64 mq_timedsend
mq_timedsend_time64 mq_unlink mremap msgctl msgget msgrcv msgsnd msync munlock munlockall
munmap name_to_handle_at nanosleep newfstatat _newselect open openat openat2 pause
pidfd_open pidfd_send_signal pipe pipe2 pkey_alloc pkey_free pkey_mprotect poll ppoll
ppoll_time64 prctl pread64 preadv preadv2 prlimit64 process_mrelease pselect6
pselect6_time64 pwrite64 pwritev pwritev2 read readahead readlink readlinkat readv
recv recvfrom recvmmsg recvmmsg_time64 recvmsg remap_file_pages removexattr
rename renameat renameat2 restart_syscall rmdir rseq rt_sigaction rt_sigpending
rt_sigprocmask rt_sigqueueinfo rt_sigreturn rt_sigsuspend rt_sigtimedwait
rt_sigtimedwait_time64 rt_tgsigqueueinfo sched_getaffinity sched_getattr sched_getparam
sched_get_priority_max sched_get_priority_min sched_getscheduler sched_rr_get_interval
sched_rr_get_interval_time64 sched_setaffinity sched_setattr sched_setparam
sched_setscheduler sched_yield seccomp select semctl semget semop semtimedop
semtimedop_time64 send sendfile sendfile64 sendmmsg sendmsg sendto setfsgid setfsgid32
setfsuid setfsuid32 setgid setgid32 setgroups setgroups32 setitimer setpgid setpriority
setregid setregid32 setresgid setresgid32 setresuid setresuid32 setreuid setreuid32
setrlimit set_robust_list setsid setsockopt set_thread_area set_tid_address setuid
setuid32 setxattr shmat shmctl shmdt shmget shutdown sigaltstack signalfd signalfd4
sigprocmask sigreturn socketcall socketpair splice stat stat64 statfs statfs64 statx
symlink symlinkat sync sync_file_range syncfs sysinfo tee tgkill time timer_create
timer_delete timer_getoverrun timer_gettime timer_gettime64 timer_settime
timer_settime64 timerfd_create timerfd_gettime timerfd_gettime64 timerfd_settime
timerfd_settime64 times tkill truncate truncate64 ugetrlimit umask uname unlink unlinkat
utime utimensat utimensat_time64 utimes vfork vmsplice wait4 waitid waitpid write writev
process_vm_readv process_vm_writev ptrace
`)

// dockerArchAllow are the per-architecture additions.
var dockerArchAllow = map[string][]string{
	"amd64": {"arch_prctl", "modify_ldt"},
	"arm64": {"arm_fadvise64_64", "arm_sync_file_range", "sync_file_range2", "breakpoint", "cacheflush", "set_tls"},
}

// dockerCapAllow are the syscalls allowed only with a capability.
var dockerCapAllow = map[string][]string{
	"CAP_DAC_READ_SEARCH": {"open_by_handle_at"},
	"CAP_SYS_ADMIN": {"bpf", "clone", "clone3", "fanotify_init", "fsconfig", "fsmount", "fsopen", "fspick",
		"lookup_dcookie", "mount", "mount_setattr", "move_mount", "open_tree", "perf_event_open", "quotactl",
		"quotactl_fd", "setdomainname", "sethostname", "setns", "syslog", "umount", "umount2", "unshare"},
	"CAP_SYS_BOOT":       {"reboot"},
	"CAP_SYS_CHROOT":     {"chroot"},
	"CAP_SYS_MODULE":     {"delete_module", "init_module", "finit_module"},
	"CAP_SYS_PACCT":      {"acct"},
	"CAP_SYS_PTRACE":     {"kcmp", "pidfd_getfd", "process_madvise", "process_vm_readv", "process_vm_writev", "ptrace"},
	"CAP_SYS_RAWIO":      {"iopl", "ioperm"},
	"CAP_SYS_TIME":       {"settimeofday", "stime", "clock_settime", "clock_settime64"},
	"CAP_SYS_TTY_CONFIG": {"vhangup"},
	"CAP_SYS_NICE":       {"get_mempolicy", "mbind", "set_mempolicy", "set_mempolicy_home_node"},
	"CAP_SYSLOG":         {"syslog"},
	"CAP_BPF":            {"bpf"},
	"CAP_PERFMON":        {"perf_event_open"},
}

// dockerCaps is the capability set Docker gives a container's root by
// default (moby's oci/caps.DefaultCapabilities; containerd's default
// spec gives Kubernetes pods the same set).
var dockerCaps = []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE"}

// Seccomp is the OCI runtime spec's linux.seccomp.
type Seccomp struct {
	DefaultAction   string    `json:"defaultAction"`
	DefaultErrnoRet *uint     `json:"defaultErrnoRet,omitempty"`
	Architectures   []string  `json:"architectures"`
	Syscalls        []Syscall `json:"syscalls"`
}

// Syscall is one rule of a Seccomp.
type Syscall struct {
	Names    []string `json:"names"`
	Action   string   `json:"action"`
	ErrnoRet *uint    `json:"errnoRet,omitempty"`
	Args     []Arg    `json:"args,omitempty"`
}

// Arg is a condition on one syscall argument.
type Arg struct {
	Index    uint   `json:"index"`
	Value    uint64 `json:"value"`
	ValueTwo uint64 `json:"valueTwo,omitempty"`
	Op       string `json:"op"`
}

const (
	allow        = "SCMP_ACT_ALLOW"
	errno        = "SCMP_ACT_ERRNO"
	afVsock      = 40
	cloneNSFlags = 0x7e020000 // CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET
	enosys       = 38
	eperm        = 1
	prSetSeccomp = 22
)

func ptr(n uint) *uint { return &n }

// dockerProfile is the runtime default profile for goarch ("amd64",
// "arm64") as it resolves for a container holding caps.
func dockerProfile(goarch string, caps []string) Seccomp {
	arches := map[string][]string{
		"amd64": {"SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"},
		"arm64": {"SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"},
	}[goarch]
	names := slices.Clone(dockerAllow)
	names = append(names, dockerArchAllow[goarch]...)
	sysAdmin := slices.Contains(caps, "CAP_SYS_ADMIN")
	for _, c := range caps {
		names = append(names, dockerCapAllow[c]...)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	p := Seccomp{DefaultAction: errno, DefaultErrnoRet: ptr(eperm), Architectures: arches}
	p.Syscalls = append(p.Syscalls,
		Syscall{Names: names, Action: allow},
		Syscall{Names: []string{"socket"}, Action: allow, Args: []Arg{{Index: 0, Value: afVsock, Op: "SCMP_CMP_NE"}}},
	)
	for _, v := range []uint64{0, 8, 0x20000, 0x20008, 0xffffffff} {
		p.Syscalls = append(p.Syscalls, Syscall{Names: []string{"personality"}, Action: allow, Args: []Arg{{Index: 0, Value: v, Op: "SCMP_CMP_EQ"}}})
	}
	if !sysAdmin {
		p.Syscalls = append(p.Syscalls,
			Syscall{Names: []string{"clone"}, Action: allow, Args: []Arg{{Index: 0, Value: cloneNSFlags, ValueTwo: 0, Op: "SCMP_CMP_MASKED_EQ"}}},
			Syscall{Names: []string{"clone3"}, Action: errno, ErrnoRet: ptr(enosys)},
		)
	}
	return p
}

// withoutLandlock is p as an older runtime's profile (before Landlock
// and a kit's own filters were allowed) or a hardened one has it: the
// landlock_* and seccomp syscalls, and prctl(PR_SET_SECCOMP), fail with
// EPERM. It stands for a platform where neither layer can be had.
func withoutLandlock(p Seccomp) Seccomp {
	p.Syscalls = slices.Clone(p.Syscalls)
	base := p.Syscalls[0]
	base.Names = slices.DeleteFunc(slices.Clone(base.Names), func(n string) bool {
		return strings.HasPrefix(n, "landlock_") || n == "seccomp" || n == "prctl"
	})
	p.Syscalls[0] = base
	p.Syscalls = append(p.Syscalls, Syscall{Names: []string{"prctl"}, Action: allow, Args: []Arg{{Index: 0, Value: prSetSeccomp, Op: "SCMP_CMP_NE"}}})
	return p
}

// seccompFiles are the generated profiles kept under testdata/seccomp.
func seccompFiles() map[string]Seccomp {
	out := map[string]Seccomp{}
	for _, arch := range []string{"amd64", "arm64"} {
		out["docker-default-"+arch+".json"] = dockerProfile(arch, dockerCaps)
		out["runtime-default-nocaps-"+arch+".json"] = dockerProfile(arch, nil)
	}
	return out
}

// TestRuntimeDefaultSeccomp checks testdata/seccomp against the
// generator (go test -run TestRuntimeDefaultSeccomp -update rewrites
// them) and the facts the platform tests rely on.
func TestRuntimeDefaultSeccomp(t *testing.T) {
	for name, p := range seccompFiles() {
		got, err := json.MarshalIndent(p, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, '\n')
		path := filepath.Join("testdata", "seccomp", name)
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -run TestRuntimeDefaultSeccomp -update ./internal/platformtest)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the generator: run go test -run TestRuntimeDefaultSeccomp -update ./internal/platformtest and review the diff", path)
		}
	}
	docker := dockerProfile("amd64", dockerCaps)
	allowed := docker.Syscalls[0].Names
	for _, name := range []string{"landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self", "seccomp", "prctl", "chroot", "ptrace"} {
		if !slices.Contains(allowed, name) {
			t.Errorf("Docker's default profile (generated) does not allow %s", name)
		}
	}
	for _, name := range []string{"unshare", "setns", "mount", "clone", "clone3", "bpf", "keyctl", "add_key", "perf_event_open"} {
		if slices.Contains(allowed, name) {
			t.Errorf("Docker's default profile (generated) allows %s unconditionally; without CAP_SYS_ADMIN it must not", name)
		}
	}
	if nocaps := dockerProfile("amd64", nil).Syscalls[0].Names; slices.Contains(nocaps, "chroot") {
		t.Error("the runtime default profile allows chroot to a container without CAP_SYS_CHROOT")
	}
	old := withoutLandlock(docker)
	if slices.Contains(old.Syscalls[0].Names, "landlock_create_ruleset") || slices.Contains(old.Syscalls[0].Names, "seccomp") {
		t.Error("withoutLandlock left Landlock or seccomp allowed")
	}
	if !slices.Contains(docker.Syscalls[0].Names, "landlock_create_ruleset") {
		t.Error("withoutLandlock changed its argument")
	}
}
