// Package labrows holds the lab's result rows: lab/labtest writes them
// (IDLETRACE_LAB_RESULTS, IDLETRACE_LAB_CROSS_RESULTS) and
// scripts/matrixreport reads them into testdata/lab-rows.* and the README.
package labrows

import (
	"encoding/json"
	"os"
)

// Fidelity is one TestLabFidelity case: a kernel's governor recorded on an
// emulated table and the same policy's model replayed on the recording.
type Fidelity struct {
	Case        string             `json:"case"` // kernel/profile/policy
	Kernel      string             `json:"kernel"`
	Periods     uint64             `json:"periods"`
	Agreement   float64            `json:"agreement"`
	KernelAbove uint64             `json:"kernel_above"`
	KernelBelow uint64             `json:"kernel_below"`
	ModelAbove  uint64             `json:"model_above"`
	ModelBelow  uint64             `json:"model_below"`
	KernelShare map[string]float64 `json:"kernel_share"`
	ModelShare  map[string]float64 `json:"model_share"`
	Pass        bool               `json:"pass"`
}

// Cross is one TestLabCrossGovernor pair: governor Replayed's model on the
// recording made under OnTraceOf, against Replayed's own recording.
type Cross struct {
	Case      string             `json:"case"` // kernel/profile
	Replayed  string             `json:"replayed"`
	OnTraceOf string             `json:"on_trace_of"`
	Periods   uint64             `json:"periods"`
	Above     [2]float64         `json:"above_pct"` // model, own recording
	Below     [2]float64         `json:"below_pct"`
	Share     map[string]float64 `json:"share_model"`
	OwnShare  map[string]float64 `json:"share_own_recording"`
	Worst     float64            `json:"worst_points"`
	Pass      bool               `json:"pass"`
}

// Experiment is one figure of a TestLabExperiment case: a policy applied in
// a lab VM, predicted from the recording before it and measured in the one
// after. Judged figures carry their bar (change, points or relative).
type Experiment struct {
	Case          string   `json:"case"`
	Figure        string   `json:"figure"`
	Bar           string   `json:"bar,omitempty"`
	Before        *float64 `json:"before"`
	Predicted     *float64 `json:"predicted"`
	Measured      *float64 `json:"measured"`
	ChangeError   *float64 `json:"change_error"`
	RelativeError *float64 `json:"relative_error"`
	Judged        bool     `json:"judged"`
	Pass          bool     `json:"pass"`
}

// Write writes rows as indented JSON to path.
func Write(path string, rows any) error {
	data, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
