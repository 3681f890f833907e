//go:build lab

package labtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/idletrace/idletrace/pkg/trace"
)

// runLab runs script (sh -c) in a lab VM through scripts/lab.sh, with the
// files of in in its working directory, and returns the directory that
// holds what it wrote to /out. profile is a built-in name or one of
// lab/profiles. A VM under TCG now and then stops making progress (seen
// once in twenty runs, on 6.1): each run is cut at 3 minutes, and a run the
// lab could not finish (exit 125) is tried once more, saying so.
func runLab(t *testing.T, root, in, kernel, profile, governor, script string, env ...string) string {
	t.Helper()
	return runLabCPUs(t, root, in, kernel, profile, governor, 2, script, env...)
}

// runLabCPUs is runLab with a VM of cpus vCPUs.
func runLabCPUs(t *testing.T, root, in, kernel, profile, governor string, cpus int, script string, env ...string) string {
	t.Helper()
	out := t.TempDir()
	if _, err := os.Stat(filepath.Join(root, "lab/profiles", profile+".json")); err == nil {
		profile = filepath.Join(root, "lab/profiles", profile+".json")
	}
	for try := 1; ; try++ {
		cmd := exec.Command("bash", filepath.Join(root, "scripts/lab.sh"), "--kernel", kernel, "--profile", profile,
			"--governor", governor, "--cpus", strconv.Itoa(cpus), "--in", in, "--out", out, "--", "sh", "-c", script)
		cmd.Dir = root
		cmd.Env = append(append(os.Environ(), "IDLETRACE_LAB_TIMEOUT=180"), env...)
		b, err := cmd.CombinedOutput()
		if err == nil {
			return out
		}
		if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 125 && try == 1 {
			t.Logf("scripts/lab.sh could not finish (%s); once more", strings.TrimSpace(lastLine(b)))
			continue
		}
		t.Fatalf("scripts/lab.sh: %v\n%s", err, b)
	}
}

// labTrace is the recording a lab row judges, named name (a file name
// without .trace). record runs the lab and returns its --out directory,
// which holds t.trace; IDLETRACE_LAB_KEEP_TRACES=DIR keeps a copy as
// DIR/name.trace. IDLETRACE_LAB_REJUDGE=DIR judges such kept copies instead,
// without a VM: the quick way to hold a changed model to earlier runs (a
// row without a kept trace fails, naming it). out is the run's --out
// directory, "" for a kept trace. The caller closes r.
func labTrace(t *testing.T, name string, record func() string) (r *trace.Reader, out string) {
	t.Helper()
	path := ""
	if dir := os.Getenv("IDLETRACE_LAB_REJUDGE"); dir != "" {
		path = filepath.Join(dir, name+".trace")
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("IDLETRACE_LAB_REJUDGE: no kept trace %s (keep them with IDLETRACE_LAB_KEEP_TRACES, or narrow the rows)", path)
		}
	} else {
		out = record()
		path = filepath.Join(out, "t.trace")
		if keep := os.Getenv("IDLETRACE_LAB_KEEP_TRACES"); keep != "" {
			if b, err := os.ReadFile(path); err == nil {
				os.WriteFile(filepath.Join(keep, name+".trace"), b, 0o644)
			}
		}
	}
	r, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return r, out
}

// The lab's runs go in parallel, IDLETRACE_LAB_JOBS at a time (default 2:
// each VM's single-threaded TCG keeps one CPU busy, and the models are held
// to the kernel's choices, not to timings, so VMs sharing the machine
// change nothing they judge). Run go test with -parallel above the number
// of rows, so that rows waiting for the lab kernel do not hold go test's
// own slots while rows on Debian's kernels could run.
var (
	labSlots     chan struct{}
	labSlotsOnce sync.Once
)

// labSlot waits for a free run slot; call the function it returns to free it.
func labSlot(t *testing.T) func() {
	labSlotsOnce.Do(func() {
		n, err := strconv.Atoi(env("IDLETRACE_LAB_JOBS", "2"))
		if err != nil || n < 1 {
			n = 1
		}
		labSlots = make(chan struct{}, n)
	})
	labSlots <- struct{}{}
	return func() { <-labSlots }
}

// The lab kernel is built (scripts/lab-kernel.sh: about 9 minutes on 2
// CPUs when not cached) while the rows on Debian's kernels run.
var (
	labKernelOnce sync.Once
	labKernelDone = make(chan struct{})
	labKernelErr  error
)

// startLabKernel starts building the lab kernel unless it is cached or the
// traces are rejudged; rows on it call waitLabKernel.
func startLabKernel(t *testing.T, root string) {
	labKernelOnce.Do(func() {
		if os.Getenv("IDLETRACE_LAB_REJUDGE") != "" {
			close(labKernelDone)
			return
		}
		go func() {
			defer close(labKernelDone)
			cmd := exec.Command("bash", filepath.Join(root, "scripts/lab-kernel.sh"))
			cmd.Dir = root
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if _, err := cmd.Output(); err != nil {
				labKernelErr = fmt.Errorf("scripts/lab-kernel.sh: %v: %s", err, strings.TrimSpace(lastLine([]byte(stderr.String()))))
			}
		}()
	})
}

func waitLabKernel(t *testing.T) {
	t.Helper()
	<-labKernelDone
	if labKernelErr != nil {
		t.Fatal(labKernelErr)
	}
}

// labRun is one row's run on kernel: it waits for the lab kernel if the row
// needs it, then for a run slot.
func labRun(t *testing.T, kernel string) func() {
	t.Helper()
	if kernel == "lab" {
		waitLabKernel(t)
	}
	return labSlot(t)
}

// appendEnv is the environment entry that adds words to the lab VM's
// kernel command line, after those the caller's IDLETRACE_LAB_APPEND
// already holds.
func appendEnv(words string) string {
	return "IDLETRACE_LAB_APPEND=" + strings.TrimSpace(os.Getenv("IDLETRACE_LAB_APPEND")+" "+words)
}
