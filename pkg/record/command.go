package record

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"

	"github.com/idletrace/idletrace/pkg/trace"
)

// CommandGrace is how long a command the recorder stops has between
// SIGTERM and SIGKILL.
const CommandGrace = 2 * time.Second

// StartError is a command that could not be started: not found, not
// executable. No trace file is left behind.
type StartError struct {
	Command string
	Err     error
}

func (e *StartError) Error() string { return fmt.Sprintf("starting %s: %v", e.Command, e.Err) }
func (e *StartError) Unwrap() error { return e.Err }

// ExitStatus is what a shell gives for a command it cannot run: 127 when
// it is not found, 126 when it is found but cannot be executed.
func (e *StartError) ExitStatus() int {
	if errors.Is(e.Err, exec.ErrNotFound) || errors.Is(e.Err, fs.ErrNotExist) {
		return 127
	}
	return 126
}

// checkCommand finds the command before anything is recorded, so that a
// typo fails at once and leaves no file.
func checkCommand(argv []string) error {
	if len(argv) == 0 {
		return nil
	}
	if _, err := exec.LookPath(argv[0]); err != nil {
		return &StartError{argv[0], err}
	}
	return nil
}

// command is the recorded command, run in its own process group so that
// stopping it stops whatever it started too.
type command struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once it has been waited for
}

// startCommand starts argv with the recorder's stdin, stdout (or the
// writer given) and stderr. The command is killed should the recorder die
// (Pdeathsig, which follows the thread that started it: that thread stays
// locked to the goroutine that waits for it).
func startCommand(argv []string, stdout io.Writer) (*command, error) {
	c := &command{cmd: exec.Command(argv[0], argv[1:]...), done: make(chan struct{})}
	c.cmd.Stdin, c.cmd.Stdout, c.cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if stdout != nil {
		c.cmd.Stdout = stdout
		// A writer that is no file is fed through a pipe, and Wait waits
		// for its end: a child the command left behind (setsid, a daemon)
		// would hold it open and hide the command's exit. Wait no longer
		// than a stop's grace for it.
		if _, file := stdout.(*os.File); !file {
			c.cmd.WaitDelay = CommandGrace
		}
	}
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := c.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = c.cmd.Wait()
		close(c.done)
	}()
	if err := <-started; err != nil {
		return nil, &StartError{argv[0], err}
	}
	return c, nil
}

// exited says whether the command has ended (and been waited for).
func (c *command) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the command's process group.
func (c *command) signal(sig syscall.Signal) {
	_ = syscall.Kill(-c.cmd.Process.Pid, sig)
}

// record stores how the command ended in the end record; stoppedBy is the
// recording's stop reason when the recorder stopped the command.
func (c *command) record(end *trace.End, stoppedBy string) {
	end.CommandStopped = stoppedBy
	if !c.exited() { // it outlived SIGKILL (stuck in the kernel): no status yet
		return
	}
	ps := c.cmd.ProcessState
	code := ps.ExitCode()
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		sig := int(ws.Signal())
		code = 128 + sig
		end.CommandSignal = &sig
	}
	end.CommandExitCode = &code
}
