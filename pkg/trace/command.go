package trace

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// CommandEnded says how the recorded command ended, for a summary line:
// "sleep stopped by SIGTERM at the end of the duration", "false exited
// with status 1", "sh killed by SIGKILL (signal 9)". It is "" when the
// trace recorded no command or does not say how it ended.
func (e *End) CommandEnded(name string) string {
	if e == nil || (e.CommandExitCode == nil && e.CommandStopped == "") {
		return ""
	}
	if e.CommandExitCode == nil {
		return name + " was still running after SIGKILL when the recording ended (" + e.CommandStopped + ")"
	}
	var how, note string
	switch code := *e.CommandExitCode; {
	case e.CommandSignal != nil && e.CommandStopped != "" && *e.CommandSignal == int(unix.SIGTERM):
		how = "stopped by SIGTERM"
	case e.CommandSignal != nil && e.CommandStopped != "" && *e.CommandSignal == int(unix.SIGKILL):
		how, note = "killed by SIGKILL", " (SIGTERM did not stop it)"
	case e.CommandSignal != nil:
		how = fmt.Sprintf("killed by %s (signal %d)", signalName(*e.CommandSignal), *e.CommandSignal)
	case code < 0: // written before CommandSignal
		how = "killed by a signal (the trace does not say which)"
	default:
		how = fmt.Sprintf("exited with status %d", code)
		if e.CommandStopped != "" {
			how += " after SIGTERM"
		}
	}
	switch e.CommandStopped {
	case "duration":
		how += " at the end of the duration"
	case "signal":
		how += " when the recording was interrupted (SIGINT or SIGTERM)"
	case "":
	default:
		how += " when the recording stopped (" + e.CommandStopped + ")"
	}
	return name + " " + how + note
}

// CommandStatus is the exit status `idletrace record -- COMMAND` gives
// when the recording itself succeeded, as time(1) and perf record do: the
// command's status when it ended on its own (128+N when signal N killed
// it), and 0 when the recorder stopped it (at the end of the duration or
// on SIGINT/SIGTERM: the recording is what was asked for) or no command
// was recorded.
func (e *End) CommandStatus() int {
	if e == nil || e.CommandExitCode == nil || e.CommandStopped != "" {
		return 0
	}
	switch code := *e.CommandExitCode; {
	case code < 0: // killed by an unknown signal (written before CommandSignal)
		return 1
	case code > 255:
		return 255
	default:
		return code
	}
}

func signalName(n int) string {
	if name := unix.SignalName(unix.Signal(n)); name != "" {
		return name
	}
	return fmt.Sprintf("signal %d", n)
}
