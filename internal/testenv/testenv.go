// Package testenv holds what tests in several packages need from the
// machine they run on.
package testenv

import (
	"os"
	"sync"
	"syscall"
	"testing"
)

// RequireRecorder: tests that record need root; without it they fail rather
// than pass unchecked (make test-short names them to leave them out). It
// also holds the machine shared for the test (see OwnMachine): a
// recording must not see a test in another package change the kernel's
// idle knobs under it (go test runs packages in parallel).
func RequireRecorder(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("recording needs root (CAP_BPF and CAP_PERFMON): run make test as root, or make test-short")
	}
	lockMachine(t, false)
}

// OwnMachine holds the machine exclusively for the test: for tests that
// change the running kernel's idle knobs (governor, states' disable,
// haltpoll's parameters, /dev/cpu_dma_latency), so that no other test
// process records or changes knobs meanwhile and each finds the knobs as
// the machine booted; and for the referee, whose exact counts of a disk's
// requests another test's recording and IO would blur at the window's
// edges. It needs root, as RequireRecorder.
func OwnMachine(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("changing the kernel's idle knobs needs root: run make test as root, or make test-short")
	}
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
