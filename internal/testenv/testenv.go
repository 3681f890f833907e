// Package testenv holds what tests in several packages need from the
// machine they run on.
package testenv

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"syscall"
	"testing"
)

// RequireRootEnv is the environment variable that turns a root-only test's
// skip into a failure. make test (and so CI) sets it: there a test that
// needs root must run, not pass unchecked.
const RequireRootEnv = "IDLETRACE_REQUIRE_ROOT"

// needRoot skips the test without root, naming what it needs, or fails it
// when RequireRootEnv is 1 (make test, CI).
func needRoot(t testing.TB, what string) {
	t.Helper()
	switch fail, msg := rootVerdict(os.Geteuid(), os.Getenv(RequireRootEnv), what); {
	case msg == "":
	case fail:
		t.Fatal(msg)
	default:
		t.Skip(msg)
	}
}

// rootVerdict says what becomes of a test that needs root for what: run it
// (msg empty), skip it, or fail it (fail).
func rootVerdict(euid int, require, what string) (fail bool, msg string) {
	if euid == 0 {
		return false, ""
	}
	if require == "1" {
		return true, what + " needs root, and " + RequireRootEnv + "=1 (make test) requires it: run make test as root, or make test-short"
	}
	return false, "skipped: " + what + " needs root (make test runs it as root)"
}

// RequireRecorder: tests that record need root; without it they are
// skipped with a message, or fail under make test (see RequireRootEnv). It
// also holds the machine shared for the test (see OwnMachine): a
// recording must not see a test in another package change the kernel's
// idle knobs under it (go test runs packages in parallel).
func RequireRecorder(t testing.TB) {
	t.Helper()
	needRoot(t, "recording (CAP_BPF and CAP_PERFMON)")
	lockMachine(t, false)
}

// OwnMachine holds the machine exclusively for the test: for tests that
// change the running kernel's idle knobs (governor, states' disable,
// haltpoll's parameters, /dev/cpu_dma_latency), so that no other test
// process records or changes knobs meanwhile and each finds the knobs as
// the machine booted; and for the referee, whose exact counts of a disk's
// requests another test's recording and IO would blur at the window's
// edges. It needs root, as RequireRecorder (skipped without it, or failed
// under make test).
func OwnMachine(t testing.TB) {
	t.Helper()
	needRoot(t, "holding the machine (changing the kernel's idle knobs, or recording with exact counts)")
	lockMachine(t, true)
}

// machineLock is an flock(2) on one file for every test process; mu keeps
// a process's own tests (which may run in parallel) from taking it twice
// on separate descriptors, which flock would treat as two holders.
var (
	mu        sync.Mutex
	holders   int
	exclusive bool
	lockFile  *os.File
)

const lockPath = "/tmp/idletrace-test-machine.lock"

func lockMachine(t testing.TB, excl bool) {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if holders > 0 && (exclusive || !excl) {
		holders++ // already held, at least as strongly
		t.Cleanup(release)
		return
	}
	if lockFile == nil {
		f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o666)
		if err != nil {
			t.Fatalf("machine lock: %v", err)
		}
		lockFile = f
	}
	how := syscall.LOCK_SH
	if excl {
		how = syscall.LOCK_EX // converts a shared lock this process holds
	}
	if err := syscall.Flock(int(lockFile.Fd()), how); err != nil {
		t.Fatalf("machine lock %s: %v", lockPath, err)
	}
	holders++
	exclusive = exclusive || excl
	t.Cleanup(release)
}

func release() {
	mu.Lock()
	defer mu.Unlock()
	if holders--; holders == 0 {
		syscall.Flock(int(lockFile.Fd()), syscall.LOCK_UN)
		exclusive = false
	}
}

// CPUResumeLatency is the sysfs file of cpu's PM QoS resume latency, whose
// value is put back when the test ends; the test skips where the kernel
// has none. A test that writes it holds the machine (OwnMachine).
func CPUResumeLatency(t testing.TB, cpu int) string {
	t.Helper()
	path := fmt.Sprintf("/sys/devices/system/cpu/cpu%d/power/pm_qos_resume_latency_us", cpu)
	old, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		t.Skipf("this kernel exposes no per-CPU resume latency (%s: CPU devices get it with CONFIG_PM, drivers/base/cpu.c)", path)
	case err != nil:
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.WriteFile(path, old, 0) })
	return path
}

// CPULatencyQoS is the CPU latency QoS device, /dev/cpu_dma_latency; the
// test skips where the kernel has none. A test that writes it holds the
// machine (OwnMachine).
func CPULatencyQoS(t testing.TB) string {
	t.Helper()
	const path = "/dev/cpu_dma_latency"
	switch _, err := os.Stat(path); {
	case errors.Is(err, fs.ErrNotExist):
		t.Skipf("this kernel has no %s (the CPU latency QoS device: CONFIG_CPU_IDLE, kernel/power/qos.c)", path)
	case err != nil:
		t.Fatal(err)
	}
	return path
}

// OwnThread says whether tid is a thread of this test process: a test
// that makes kernel requests keeps only its own among those recorded.
func OwnThread(tid uint32) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", tid))
	return err == nil
}
