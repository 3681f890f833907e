package testenv

import (
	"strings"
	"testing"
)

// Without root a root-only test is skipped with what it needs under plain
// go test, and fails under make test (IDLETRACE_REQUIRE_ROOT=1).
func TestRootVerdict(t *testing.T) {
	const what = "recording (CAP_BPF and CAP_PERFMON)"
	for _, tc := range []struct {
		euid     int
		require  string
		fail     bool
		contains string
	}{
		{0, "", false, ""},
		{0, "1", false, ""},
		{1000, "", false, "skipped: recording (CAP_BPF and CAP_PERFMON) needs root"},
		{1000, "0", false, "skipped: "},
		{1000, "1", true, "IDLETRACE_REQUIRE_ROOT=1 (make test) requires it"},
	} {
		fail, msg := rootVerdict(tc.euid, tc.require, what)
		if fail != tc.fail || (tc.contains == "") != (msg == "") || !strings.Contains(msg, tc.contains) {
			t.Errorf("euid %d, %s=%q: fail=%v msg=%q", tc.euid, RequireRootEnv, tc.require, fail, msg)
		}
		if msg != "" && !strings.Contains(msg, what) {
			t.Errorf("euid %d: %q does not name what the test needs", tc.euid, msg)
		}
	}
}
