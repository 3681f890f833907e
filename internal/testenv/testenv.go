// Package testenv holds what tests in several packages need from the
// machine they run on.
package testenv

import (
	"os"
	"testing"
)

// RequireRecorder: tests that record need root; without it they fail rather
// than pass unchecked (make test-short names them to leave them out).
func RequireRecorder(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("recording needs root (CAP_BPF and CAP_PERFMON): run make test as root, or make test-short")
	}
}
