//go:build lab

package labtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestMain builds idletrace and labprofile once for every scripts/lab.sh
// run the tests start (IDLETRACE_LAB_TOOLS): lab.sh would otherwise link
// both for each VM, about 2 s of a CPU each time, 80 times in CI's rows.
func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	if os.Getenv("IDLETRACE_LAB_TOOLS") == "" && os.Getenv("IDLETRACE_LAB_REJUDGE") == "" {
		dir, err := os.MkdirTemp("", "idletrace-labtools.")
		if err != nil {
			fmt.Fprintln(os.Stderr, "labtest:", err)
			return 1
		}
		defer os.RemoveAll(dir)
		if err := buildLabTools(dir); err != nil {
			fmt.Fprintln(os.Stderr, "labtest:", err)
			return 1
		}
		os.Setenv("IDLETRACE_LAB_TOOLS", dir)
	}
	return m.Run()
}

// buildLabTools builds what scripts/lab.sh puts in the VM and runs on the
// host, as it would build them (static, trimmed paths), from this tree.
func buildLabTools(dir string) error {
	root, err := filepath.Abs("../..")
	if err != nil {
		return err
	}
	for _, pkg := range []string{"./cmd/idletrace", "./lab/labprofile"} {
		build := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, filepath.Base(pkg)), pkg)
		build.Dir, build.Env = root, append(os.Environ(), "CGO_ENABLED=0")
		if b, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("building %s: %v\n%s", pkg, err, b)
		}
	}
	return nil
}
