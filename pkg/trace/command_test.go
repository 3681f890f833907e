package trace

import (
	"encoding/json"
	"testing"
)

// TestCommandEnd: how a recorded command ended, in words and as record's
// exit status (trial 11 items 2 and 4): a signal is never "status -1", and
// a command the recorder stopped gives 0.
func TestCommandEnd(t *testing.T) {
	n := func(v int) *int { return &v }
	cases := []struct {
		name string
		end  End
		want string
		code int
	}{
		{"no command", End{}, "", 0},
		{"exited 0", End{CommandExitCode: n(0)}, "x exited with status 0", 0},
		{"exited 1", End{CommandExitCode: n(1)}, "x exited with status 1", 1},
		{"killed on its own", End{CommandExitCode: n(143), CommandSignal: n(15)}, "x killed by SIGTERM (signal 15)", 143},
		{"SIGKILL on its own", End{CommandExitCode: n(137), CommandSignal: n(9)}, "x killed by SIGKILL (signal 9)", 137},
		{"stopped at the duration", End{CommandExitCode: n(143), CommandSignal: n(15), CommandStopped: "duration"},
			"x stopped by SIGTERM at the end of the duration", 0},
		{"stopped on a signal", End{CommandExitCode: n(143), CommandSignal: n(15), CommandStopped: "signal"},
			"x stopped by SIGTERM when the recording was interrupted (SIGINT or SIGTERM)", 0},
		{"outlived SIGTERM", End{CommandExitCode: n(137), CommandSignal: n(9), CommandStopped: "duration"},
			"x killed by SIGKILL at the end of the duration (SIGTERM did not stop it)", 0},
		{"handled SIGTERM", End{CommandExitCode: n(1), CommandStopped: "duration"},
			"x exited with status 1 after SIGTERM at the end of the duration", 0},
		{"outlived SIGKILL", End{CommandStopped: "duration"},
			"x was still running after SIGKILL when the recording ended (duration)", 0},
		{"old writer's killed command", End{CommandExitCode: n(-1)}, "x killed by a signal (the trace does not say which)", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.end.CommandEnded("x"); got != tc.want {
				t.Errorf("CommandEnded = %q, want %q", got, tc.want)
			}
			if got := tc.end.CommandStatus(); got != tc.code {
				t.Errorf("CommandStatus = %d, want %d", got, tc.code)
			}
		})
	}
	// The new fields are optional: an end without a command writes none.
	b, err := json.Marshal(End{})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"command_exit_code", "command_signal", "command_stopped"} {
		if _, ok := m[k]; ok {
			t.Errorf("an end without a command writes %q", k)
		}
	}
}
