package record

import (
	"bytes"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCommandStdoutNotAFile: a command whose stdout is a writer (a pipe
// Go copies from) is seen to exit although a child it left behind holds
// that pipe open, within CommandGrace, with its output and its status
// (without WaitDelay the recorder would have waited for the child: 30 s
// here, for ever after a setsid).
func TestCommandStdoutNotAFile(t *testing.T) {
	var out bytes.Buffer
	c, err := startCommand([]string{"sh", "-c", "echo hello; sleep 30 & echo $!; exit 4"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	select {
	case <-c.done:
	case <-time.After(CommandGrace + 5*time.Second):
		t.Fatalf("the command's exit not seen after %v: its child holds the pipe", time.Since(start))
	}
	lines := strings.Fields(out.String())
	if len(lines) != 2 || lines[0] != "hello" {
		t.Fatalf("output %q, want hello and the child's PID", out.String())
	}
	if pid, err := strconv.Atoi(lines[1]); err == nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if code := c.cmd.ProcessState.ExitCode(); code != 4 {
		t.Errorf("exit status %d, want 4", code)
	}
}
