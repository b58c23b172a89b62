package kit

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// envFDVar names the file descriptor a kit reads its environment from
// when it was started with a scrubbed one.
const envFDVar = "GLOVEBOX_ENV_FD"

// protectSecrets keeps the box key and every other variable of the kit's
// environment (storage credentials, brokered secrets) out of reach of the
// processes agents start:
//
//   - the environment block the kernel shows in /proc/PID/environ holds
//     nothing: the kit overwrites it with zeros in its own memory (the Go
//     runtime keeps copies of its own). Where that cannot be done, the kit
//     executes itself again (same pid) with an empty environment and reads
//     the real one from a memfd.
//   - the process is not dumpable, so /proc/PID/mem, /proc/PID/environ and
//     ptrace are closed to every user but root, the kit's own uid included;
//
// It returns an error only when the kit must not go on.
func protectSecrets() error {
	scrub := !restored && envRestoreErr == nil && os.Getenv("GLOVEBOX_SCRUB_ENV") != "off"
	// Before the process stops being dumpable: then /proc/self/mem
	// belongs to root, and a kit that is not root could not open it.
	if scrub && clearEnvironBlock() == nil {
		scrub = false
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("make the kit non-dumpable: %w", err)
	}
	if envRestoreErr != nil || !scrub {
		return envRestoreErr
	}
	f, err := envFile(os.Environ())
	if err != nil {
		return nil // keep going with the environment as it is
	}
	exe, err := os.Executable()
	if err != nil {
		f.Close()
		return nil
	}
	// The memfd must survive exec.
	if _, err := unix.FcntlInt(f.Fd(), unix.F_SETFD, 0); err != nil {
		f.Close()
		return nil
	}
	// Exec returns only when it failed: keep going with the environment
	// as it is.
	_ = syscall.Exec(exe, os.Args, []string{envFDVar + "=" + strconv.Itoa(int(f.Fd()))})
	f.Close()
	return nil
}

// clearEnvironBlock overwrites the environment block the kernel set up
// for the process (what /proc/PID/environ shows) with zeros, through
// /proc/self/mem, and checks that /proc/self/environ shows nothing left.
// The process's environment is untouched: the Go runtime copied it at
// start.
func clearEnvironBlock() error {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return err
	}
	// After the command's name, in parentheses, field 3 (state) onwards;
	// env_start and env_end are fields 50 and 51.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return errors.New("/proc/self/stat: no command name")
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 51-2 {
		return errors.New("/proc/self/stat: no env_start and env_end")
	}
	start, err1 := strconv.ParseInt(fields[50-3], 10, 64)
	end, err2 := strconv.ParseInt(fields[51-3], 10, 64)
	if err1 != nil || err2 != nil || start <= 0 || end < start || end-start > 64<<20 {
		return fmt.Errorf("/proc/self/stat: env_start %q, env_end %q", fields[50-3], fields[51-3])
	}
	if end == start {
		return nil
	}
	mem, err := os.OpenFile("/proc/self/mem", os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = mem.WriteAt(make([]byte, end-start), start)
	if cerr := mem.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	left, err := os.ReadFile("/proc/self/environ")
	if err != nil {
		return err
	}
	if len(bytes.Trim(left, "\x00")) > 0 {
		return errors.New("/proc/self/environ still shows the environment")
	}
	return nil
}

// The environment is restored as the package initialises, before any
// main, TestMain or flag default reads it.
var (
	restored      bool
	envRestoreErr error
)

func init() {
	if fdStr, ok := os.LookupEnv(envFDVar); ok {
		envRestoreErr = restoreEnv(fdStr)
		restored = envRestoreErr == nil
	}
}

// envFile writes env, NUL-separated, into a sealed memfd.
func envFile(env []string) (*os.File, error) {
	return sealedFile("glovebox-env", []byte(strings.Join(env, "\x00")))
}

// sealedFile writes data into a sealed memfd named name.
func sealedFile(name string, data []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, err
	}
	_, _ = unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_WRITE|unix.F_SEAL_GROW|unix.F_SEAL_SHRINK|unix.F_SEAL_SEAL)
	return f, nil
}

// restoreEnv replaces the process's environment with what the memfd
// named by fdStr holds, and closes it.
func restoreEnv(fdStr string) error {
	fd, err := strconv.Atoi(fdStr)
	if err != nil || fd < 3 {
		return fmt.Errorf("%s=%q is not a file descriptor", envFDVar, fdStr)
	}
	f := os.NewFile(uintptr(fd), "glovebox-env")
	defer f.Close()
	data, err := readAllAt(f)
	if err != nil {
		return fmt.Errorf("read the environment from %s: %w", envFDVar, err)
	}
	os.Clearenv()
	for _, kv := range bytes.Split(data, []byte{0}) {
		if k, v, ok := strings.Cut(string(kv), "="); ok && k != "" {
			os.Setenv(k, v)
		}
	}
	return nil
}

func readAllAt(f *os.File) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	data := make([]byte, st.Size())
	_, err = f.ReadAt(data, 0)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return data, err
}
