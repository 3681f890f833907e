// Package testenv holds what tests in several packages need from the
// machine they run on.
package testenv

import (
	"os"
	"testing"
)

// RequireRecorder: tests that record need root; without it they fail rather
// than pass unchecked. -short (make test-short) leaves them out on request.
func RequireRecorder(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: this test loads BPF programs (tp_btf or classic tracepoints, a ring buffer) as root; make test runs it")
	}
	if os.Geteuid() != 0 {
		t.Fatal("recording needs root (CAP_BPF and CAP_PERFMON): run make test as root, or make test-short")
	}
}
