package model

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/idletrace/idletrace/pkg/trace"
)

// Tables of built-in profiles. Exit latency / target residency are the
// kernel's µs values from the driver named in each Source line; states are
// listed shallow to deep with the core POLL state at index 0, as the cpuidle
// core sees them on x86. The hsw table was checked field by field against
// drivers/idle/intel_idle.c; the others follow ../shared/research/governors.md
// §8 (which cites intel_idle.c / acpi_idle) and should be re-checked against
// the kernel before being quoted in a bug report.
//
// Power is never in the kernel tables. Every built-in power value is an
// estimate (PowerEstimated=true) from EstimatePower: a polling CPU is
// counted at 0.9 of a busy core, and a halted state at
// max(0.02, 0.35/(1+exit_latency_µs/10)) — deeper states (longer exit
// latency) draw less. The numbers only order the states and give the energy
// comparison a plausible scale; they are not measurements.

// MaxStates is the cpuidle core's CPUIDLE_STATE_MAX (trace.MaxStates).
const MaxStates = trace.MaxStates

// haltpollStateName is the halt state cpuidle-haltpoll registers: a
// table with it is a KVM guest's.
const haltpollStateName = "haltpoll idle"

// DefaultHZ is used when neither the trace nor the profile says HZ.
const DefaultHZ = 250

// ErrNeedsMeasurement is returned by LoadProfile for "measured": that profile
// needs the wake latencies measured in the trace; call Measured.
var ErrNeedsMeasurement = errors.New(`profile "measured" needs the trace's measured wake latencies (use model.Measured)`)

type builtinState struct {
	name     string
	exitUs   float64
	residUs  float64
	disabled bool
	polling  bool
	desc     string
}

type builtin struct {
	name, desc, source string
	states             []builtinState
}

var pollState = builtinState{name: "POLL", polling: true, desc: "CPUIDLE CORE POLL IDLE"}

var builtins = []builtin{
	{"hsw", "Intel Haswell client/server (intel_idle hsw_cstates; Haswell-EP takes it with use_acpi: a state the firmware's _CST does not list starts disabled, so disable= those)",
		"drivers/idle/intel_idle.c hsw_cstates, Linux 6.12.117 (the same values in a 6.17+ tree)",
		[]builtinState{pollState, {name: "C1", exitUs: 2, residUs: 2}, {name: "C1E", exitUs: 10, residUs: 20},
			{name: "C3", exitUs: 33, residUs: 100}, {name: "C6", exitUs: 133, residUs: 400}, {name: "C7s", exitUs: 166, residUs: 500},
			{name: "C8", exitUs: 300, residUs: 900}, {name: "C9", exitUs: 600, residUs: 1800}, {name: "C10", exitUs: 2600, residUs: 7700}}},
	{"skl", "Intel Skylake client (intel_idle skl_cstates)",
		"drivers/idle/intel_idle.c skl_cstates, Linux 6.12.117 (the same values in a 6.17+ tree)",
		[]builtinState{pollState, {name: "C1", exitUs: 2, residUs: 2}, {name: "C1E", exitUs: 10, residUs: 20},
			{name: "C3", exitUs: 70, residUs: 100}, {name: "C6", exitUs: 85, residUs: 200}, {name: "C7s", exitUs: 124, residUs: 800},
			{name: "C8", exitUs: 200, residUs: 800}, {name: "C9", exitUs: 480, residUs: 5000}, {name: "C10", exitUs: 890, residUs: 5000}}},
	{"skx", "Intel Skylake-SP / Cascade Lake-SP (intel_idle skx_cstates)",
		"drivers/idle/intel_idle.c skx_cstates, Linux 6.12.117 (the same values in a 6.17+ tree)",
		[]builtinState{pollState, {name: "C1", exitUs: 2, residUs: 2}, {name: "C1E", exitUs: 10, residUs: 20}, {name: "C6", exitUs: 133, residUs: 600}}},
	{"icx", "Intel Ice Lake-SP/D (intel_idle icx_cstates)",
		"drivers/idle/intel_idle.c icx_cstates, Linux 6.12.117 (the same values in a 6.17+ tree)",
		[]builtinState{pollState, {name: "C1", exitUs: 1, residUs: 1}, {name: "C1E", exitUs: 4, residUs: 4}, {name: "C6", exitUs: 170, residUs: 600}}},
	{"spr", "Intel Sapphire/Emerald Rapids (intel_idle spr_cstates)",
		"drivers/idle/intel_idle.c spr_cstates, Linux 6.12.117 (the same values in a 6.17+ tree)",
		[]builtinState{pollState, {name: "C1", exitUs: 1, residUs: 1}, {name: "C1E", exitUs: 2, residUs: 4}, {name: "C6", exitUs: 290, residUs: 800}}},
	{"gnr", "Intel Granite Rapids (intel_idle gnr_cstates)",
		"drivers/idle/intel_idle.c gnr_cstates, Linux 6.12.117 (the same values in a 6.17+ tree)",
		[]builtinState{pollState, {name: "C1", exitUs: 1, residUs: 1}, {name: "C1E", exitUs: 4, residUs: 4},
			{name: "C6", exitUs: 170, residUs: 650}, {name: "C6P", exitUs: 210, residUs: 1000}}},
	{"srf", "Intel Sierra Forest (intel_idle srf_cstates)",
		"drivers/idle/intel_idle.c srf_cstates, Linux 6.12.117 (the same values in a 6.17+ tree)",
		[]builtinState{pollState, {name: "C1", exitUs: 1, residUs: 1}, {name: "C1E", exitUs: 2, residUs: 10},
			{name: "C6S", exitUs: 270, residUs: 700}, {name: "C6SP", exitUs: 310, residUs: 900}}},
	{"adl", "Intel Alder Lake desktop (intel_idle adl_cstates; C1 is unusable unless preferred over C1E, so it is not registered)",
		"drivers/idle/intel_idle.c adl_cstates (C1 CPUIDLE_FLAG_UNUSABLE), Linux 6.12.117 (the same values in a 6.17+ tree)",
		[]builtinState{pollState, {name: "C1E", exitUs: 2, residUs: 4},
			{name: "C6", exitUs: 220, residUs: 600}, {name: "C8", exitUs: 280, residUs: 800}, {name: "C10", exitUs: 680, residUs: 2000}}},
	{"epyc", "AMD EPYC via ACPI _CST (acpi_idle, residency = 2 x latency)",
		"drivers/acpi/processor_idle.c (acpi_idle) with the _CST values of Gorman's 7a25759eaa04 changelog (5.11), Linux 6.12.117; firmware-dependent",
		[]builtinState{pollState, {name: "C1", exitUs: 1, residUs: 2}, {name: "C2", exitUs: 400, residUs: 800}}},
	{"haltpoll", "KVM guest with cpuidle-haltpoll (POLL + guest HLT)",
		"drivers/cpuidle/cpuidle-haltpoll.c, Linux 6.12.117 (HLT exit latency as the table states it; the host decides the real one)",
		[]builtinState{pollState, {name: haltpollStateName, exitUs: 1, residUs: 1, desc: "default architecture idle"}}},
}

// BuiltinNames lists the built-in profiles in a stable order.
func BuiltinNames() []string {
	out := make([]string, len(builtins))
	for i, b := range builtins {
		out[i] = b.name
	}
	return out
}

// BuiltinDescription is a one-line description of a built-in profile.
func BuiltinDescription(name string) string {
	for _, b := range builtins {
		if b.name == name {
			return b.desc
		}
	}
	return ""
}

// Builtin returns a fresh copy of a built-in profile at the given HZ
// (0: DefaultHZ).
func Builtin(name string, hz int) (*Profile, error) {
	if hz <= 0 {
		hz = DefaultHZ
	}
	for _, b := range builtins {
		if b.name != name {
			continue
		}
		p := &Profile{Name: b.name, Source: b.source + "; power: estimated", HZ: hz}
		for _, s := range b.states {
			st := State{Name: s.name, Desc: s.desc, ExitLatencyNs: usToNs(s.exitUs), TargetResidencyNs: usToNs(s.residUs),
				Polling: s.polling, Disabled: s.disabled}
			st.Power, st.PowerEstimated = EstimatePower(st), true
			p.States = append(p.States, st)
		}
		return p, nil
	}
	switch {
	case name == "recorded" || name == "measured":
		return nil, fmt.Errorf("%q is a trace's own table, not a built-in: whatif TRACE --profile %s replays on it, and info TRACE shows the recorded one", name, name)
	case slices.Contains(BuiltinNames(), strings.ToLower(name)):
		return nil, fmt.Errorf("no built-in profile %q: the names are lower case (%s)", name, strings.ToLower(name))
	}
	return nil, fmt.Errorf("no built-in profile %q (built-in: %s)", name, strings.Join(BuiltinNames(), ", "))
}

// busyCorePower is a running core's power, the unit of every state's.
const busyCorePower = 1.0

// EstimatePower is the documented power guess for a state without a given
// power: 0.9 of a busy core for a polling state, else
// max(0.02, 0.35/(1+exit_latency_µs/10)).
func EstimatePower(s State) float64 {
	if s.Polling {
		return 0.9
	}
	p := 0.35 / (1 + float64(s.ExitLatencyNs)/10000)
	return math.Max(minEstimatedPower, p)
}

// minEstimatedPower is the floor of EstimatePower: a deep state still
// draws something.
const minEstimatedPower = 0.02

func usToNs(us float64) uint64 { return uint64(math.Round(us * 1000)) }

// TickNs is TICK_NSEC for the profile's HZ: 1e9/HZ rounded to nearest.
func (p *Profile) TickNs() int64 {
	hz := p.HZ
	if hz <= 0 {
		hz = DefaultHZ
	}
	return (1_000_000_000 + int64(hz)/2) / int64(hz)
}

// Clone returns a deep copy.
func (p *Profile) Clone() *Profile {
	q := *p
	q.States = append([]State(nil), p.States...)
	return &q
}

// StateIndex finds a state by name, case-insensitively; -1 if absent.
func (p *Profile) StateIndex(name string) int {
	for i := range p.States {
		if strings.EqualFold(p.States[i].Name, name) {
			return i
		}
	}
	return -1
}

// Recorded builds the profile of the machine a trace was recorded on, from
// CPU 0's state table and the trace's HZ.
//
// Without a cpuidle driver (meta.NoCPUIdleDriver(), no state table)
// the kernel runs default_idle_call (HLT on x86), which the cpu_idle
// tracepoint reports as state 1; cpu_idle_poll (idle=poll, broadcast
// timer) reports state 0. The profile is then synthesised as state 0 "POLL"
// (polling, 0/0) and state 1 "HLT" with exit latency and target residency
// 1 µs, the values cpuidle-haltpoll's table gives the same instruction. No
// governor ran on such a machine: `recorded` replays what the kernel did
// (always HLT), the governor models say what a driver plus governor would
// have done.
func Recorded(meta *trace.Metadata) (*Profile, error) {
	if meta != nil && meta.ExitLatenciesUnknown {
		// Zero exit latencies would make every wake-up free in the report.
		return nil, errors.New("recorded profile: the trace's state table has no exit latencies (imported from a capture whose header lists only target residencies): give --profile with a built-in name (idletrace profiles) or a profile file")
	}
	return recordedTable(meta)
}

// GovernorChose says a cpuidle governor chose the recorded periods' states
// among the trace's state table: the kernel had a cpuidle driver, and the
// trace holds its table. Otherwise the recorded profile assumes POLL and
// HLT (recordedTable).
func GovernorChose(meta *trace.Metadata) bool {
	return meta != nil && !meta.NoCPUIdleDriver() && len(meta.TableCPU().States) > 0
}

// recordedTable is Recorded without its refusal of a table whose exit
// latencies are unknown (read as zero): the replay's account of the
// recorded choices, which a policy's own profile then corrects.
func recordedTable(meta *trace.Metadata) (*Profile, error) {
	if meta == nil {
		return nil, errors.New("recorded profile: trace has no metadata")
	}
	hz := meta.HZ
	hzNote := ""
	if hz <= 0 {
		hz = DefaultHZ
		hzNote = fmt.Sprintf("; HZ unknown in the trace, %d assumed", DefaultHZ)
	}
	rel := meta.KernelRelease
	if rel == "" {
		rel = "unknown kernel"
	}
	cs := meta.TableCPU()
	if !GovernorChose(meta) {
		why := "the kernel had no cpuidle driver, so no governor ran and it idled in default_idle_call (HLT, traced as state 1)"
		if meta.CPUIdleDriver == "" {
			// An imported capture: neither a driver nor a table is known.
			why = "the trace has no state table and does not name the cpuidle driver (an imported capture; give --profile), so POLL and HLT are assumed"
		}
		p := &Profile{Name: "recorded", HZ: hz,
			Source: fmt.Sprintf("trace (%s): %s; "+
				"HLT exit latency and target residency of 1 µs assumed as cpuidle-haltpoll's table states them; power estimated%s", rel, why, hzNote)}
		p.States = []State{
			{Name: "POLL", Desc: "cpu_idle_poll (idle=poll or broadcast timer)", Polling: true},
			{Name: "HLT", Desc: "default_idle_call (architecture default idle)", ExitLatencyNs: 1000, TargetResidencyNs: 1000},
		}
		for i := range p.States {
			p.States[i].Power, p.States[i].PowerEstimated = EstimatePower(p.States[i]), true
		}
		return p, nil
	}
	if len(cs.States) > MaxStates {
		return nil, fmt.Errorf("recorded profile: CPU %d has %d idle states, more than the kernel's %d", cs.CPU, len(cs.States), MaxStates)
	}
	sts := append([]trace.StateInfo(nil), cs.States...)
	sort.Slice(sts, func(i, j int) bool { return sts[i].Index < sts[j].Index })
	p := &Profile{Name: "recorded", HZ: hz,
		Source: fmt.Sprintf("trace (%s, cpuidle driver %s, CPU %d's table); power estimated%s", rel, cmp.Or(meta.CPUIdleDriver, "unknown"), cs.CPU, hzNote)}
	for i, s := range sts {
		if s.Index != i {
			return nil, fmt.Errorf("recorded profile: CPU %d's state table skips index %d", cs.CPU, i)
		}
		st := State{Name: s.Name, Desc: s.Desc, ExitLatencyNs: s.ExitLatencyNs, TargetResidencyNs: s.TargetResidencyNs,
			Polling: s.Polling, Disabled: s.Disabled}
		st.Power, st.PowerEstimated = EstimatePower(st), true
		p.States = append(p.States, st)
	}
	return p, nil
}

// Measured is the recorded profile with each state's exit latency replaced
// by the wake latency measured in the trace for that state (the median,
// p50, of remote wake request → idle exit), keyed by state name. States
// without a measurement keep the table value; polling states keep 0.
func Measured(meta *trace.Metadata, wakeLatencyP50Ns map[string]uint64) (*Profile, error) {
	p, err := Recorded(meta)
	if err != nil {
		return nil, err
	}
	p.Name = "measured"
	var used, polled, under []string
	for i := range p.States {
		s := &p.States[i]
		if s.Polling {
			if _, ok := wakeLatencyP50Ns[s.Name]; ok {
				polled = append(polled, s.Name)
			}
			continue
		}
		if v, ok := wakeLatencyP50Ns[s.Name]; ok {
			s.ExitLatencyNs = v
			used = append(used, s.Name)
			if s.TargetResidencyNs < v {
				under = append(under, s.Name)
			}
		}
	}
	if len(used) == 0 {
		p.Source += "; no wake latency was measured, so exit latencies are the table's"
	} else {
		p.Source += "; exit latency of " + strings.Join(used, ", ") + " replaced by the median (p50) wake latency measured in the trace" +
			" (the estimated powers stay those of the table's exit latencies: a measured wake-up holds the wake-up path's time, not only the state's exit)"
	}
	if len(under) > 0 {
		// Kept: the governors choose by the driver's targets, on this
		// machine as in the recording; only what a wake-up costs changes.
		p.Source += "; target residency of " + strings.Join(under, ", ") + " kept as the driver gives it, below the measured exit latency (the governors choose as the machine's did, and pay what it took)"
	}
	if len(polled) > 0 {
		// A polling CPU has nothing to leave: what a wake-up from it took
		// is the wake-up's own path (the IPI, on a VM the host), which
		// every state's measured figure includes too.
		p.Source += "; " + strings.Join(polled, ", ") + " kept at 0 (a polling CPU has no exit; its measured wake-ups took the wake-up path's own time)"
	}
	return p, nil
}

// LoadProfile resolves --profile: "recorded" (the trace's table), a
// built-in name, or a path to a JSON profile file. HZ comes from the trace
// (a file's hz only where the trace has none). "measured" yields ErrNeedsMeasurement.
func LoadProfile(nameOrPath string, meta *trace.Metadata) (*Profile, error) {
	hz := 0
	if meta != nil {
		hz = meta.HZ
	}
	switch {
	case nameOrPath == "" || nameOrPath == "recorded":
		return Recorded(meta)
	case nameOrPath == "measured":
		return nil, ErrNeedsMeasurement
	}
	for _, b := range builtins {
		if b.name != nameOrPath && strings.EqualFold(b.name, nameOrPath) {
			return nil, fmt.Errorf("profile %q: the built-in names are lower case (%s)", nameOrPath, b.name)
		}
		if b.name == nameOrPath {
			p, err := Builtin(b.name, hz)
			if err != nil {
				return nil, err
			}
			if hz <= 0 {
				p.Source += fmt.Sprintf("; HZ unknown, %d assumed", DefaultHZ)
			}
			return p, nil
		}
	}
	if !strings.ContainsAny(nameOrPath, "/.") {
		if _, err := os.Stat(nameOrPath); err != nil {
			return nil, fmt.Errorf("profile %q: not recorded, measured, a built-in (%s) or a file", nameOrPath, strings.Join(BuiltinNames(), ", "))
		}
	}
	data, err := os.ReadFile(nameOrPath)
	if err != nil {
		return nil, fmt.Errorf("profile %s: %v", nameOrPath, unwrapPathErr(err))
	}
	return ParseProfile(nameOrPath, data, hz)
}

func unwrapPathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// fileState is one state of a profile file. Times come in µs (docs/DESIGN.md's
// form) or in ns (what `idletrace profiles --format json` writes), so that
// a profile printed by idletrace reads back as the same profile.
type fileState struct {
	Name              string   `json:"name"`
	Desc              string   `json:"desc"`
	ExitLatencyUs     *float64 `json:"exit_latency_us"`
	TargetResidencyUs *float64 `json:"target_residency_us"`
	ExitLatencyNs     *float64 `json:"exit_latency_ns"`
	TargetResidencyNs *float64 `json:"target_residency_ns"`
	Polling           bool     `json:"polling"`
	Disabled          bool     `json:"disabled"`
	Power             *float64 `json:"power"`
	// PowerEstimated: the power given is idletrace's own estimate (as
	// printed): it is said so where it still is the estimate of the
	// state as given, else it is the file's own value.
	PowerEstimated bool `json:"power_estimated"`
}

// microseconds takes a time given in µs or in ns, not both.
func microseconds(us, ns *float64, field, name string, bad func(field, format string, a ...any) error) (*float64, error) {
	switch {
	case us != nil && ns != nil:
		return nil, bad(field+"."+name+"_us", "give %s_us or %s_ns, not both", name, name)
	case ns != nil:
		v := *ns / 1000
		return &v, nil
	}
	return us, nil
}

// timeKey is a state's time as a profile file spells it: name_us or name_ns.
type timeKey struct {
	name string
	ns   bool
}

func spelled(name string, ns *float64) timeKey {
	if ns != nil {
		return timeKey{name + "_ns", true}
	}
	return timeKey{name + "_us", false}
}

// missingKey names a state's missing time as the file spells the state's
// other time (us, ns: that time, either pointer nil if not so spelled);
// with neither given, it names both spellings.
func missingKey(name string, us, ns *float64) string {
	switch {
	case ns != nil:
		return name + "_ns"
	case us != nil:
		return name + "_us"
	}
	return name + "_us (or " + name + "_ns)"
}

// show gives a time of us µs in the key's unit.
func (k timeKey) show(us float64) string {
	if k.ns {
		return fmt.Sprintf("%g ns", us*1000)
	}
	return fmt.Sprintf("%g µs", us)
}

type fileProfile struct {
	Name   string            `json:"name"`
	HZ     *int              `json:"hz"`
	Source string            `json:"source"`
	States []json.RawMessage `json:"states"`
}

// ParseProfile decodes and validates a JSON profile (docs/DESIGN.md format).
// label names the file in errors; traceHZ, where known (> 0), is the
// profile's HZ whatever the file says.
// Every error names the field: `profile x.json: states[2].exit_latency_us: must be >= 0`.
func ParseProfile(label string, data []byte, traceHZ int) (*Profile, error) {
	bad := func(field, format string, a ...any) error {
		return fmt.Errorf("profile %s: %s: %s", label, field, fmt.Sprintf(format, a...))
	}
	// Windows editors may save a UTF-8 byte-order mark, which is no JSON.
	body := bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	var fp fileProfile
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fp); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			se.Offset += int64(len(data) - len(body)) // the file's byte, BOM counted
		}
		return nil, jsonErr(label, "", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("profile %s: trailing data after the JSON object", label)
	}
	p := &Profile{Name: fp.Name}
	if p.Name == "" {
		p.Name = strings.TrimSuffix(filepath.Base(label), filepath.Ext(label))
	}
	// "recorded" and "measured" name the trace's own table (the replay
	// then judges agreement and defaults to the recorded choices): a file,
	// even one cut from a report of that table, is another machine's.
	switch p.Name {
	case "", "recorded", "measured":
		p.Name = strings.TrimSpace(p.Name + " (file)")
	}
	// The replay keeps the trace's HZ, as a built-in does: the workload's
	// ticks and timers were recorded at it, and a table copied from
	// `profiles NAME --format json` must replay as NAME does. The file's
	// hz counts only where the trace does not know its own (--hz
	// overrides both).
	hzNote := ""
	if fp.HZ != nil && (*fp.HZ <= 0 || *fp.HZ > 10000) {
		return nil, bad("hz", "must be between 1 and 10000, got %d", *fp.HZ)
	}
	switch {
	case traceHZ > 0:
		p.HZ = traceHZ
		if fp.HZ != nil && *fp.HZ != traceHZ {
			hzNote = fmt.Sprintf("; the file's hz %d not used: the trace's ticks and timers were recorded at HZ=%d (--hz sets another)", *fp.HZ, traceHZ)
		}
	case fp.HZ != nil:
		p.HZ = *fp.HZ
	default:
		p.HZ = DefaultHZ
	}
	if len(fp.States) == 0 {
		return nil, bad("states", "must list at least one state")
	}
	if len(fp.States) > MaxStates {
		return nil, bad("states", "has %d states, the kernel allows at most %d", len(fp.States), MaxStates)
	}
	estimated := false
	var units, doubts []string // times that look given in the other unit; powers marked estimated that are not
	for i, raw := range fp.States {
		field := fmt.Sprintf("states[%d]", i)
		var fs fileState
		d := json.NewDecoder(bytes.NewReader(raw))
		d.DisallowUnknownFields()
		if err := d.Decode(&fs); err != nil {
			return nil, jsonErr(label, field, err)
		}
		if strings.TrimSpace(fs.Name) == "" {
			return nil, bad(field+".name", "must not be empty")
		}
		if j := p.StateIndex(fs.Name); j >= 0 {
			return nil, bad(field+".name", "%q repeats states[%d]", fs.Name, j)
		}
		var err error
		if fs.ExitLatencyUs, err = microseconds(fs.ExitLatencyUs, fs.ExitLatencyNs, field, "exit_latency", bad); err != nil {
			return nil, err
		}
		if fs.TargetResidencyUs, err = microseconds(fs.TargetResidencyUs, fs.TargetResidencyNs, field, "target_residency", bad); err != nil {
			return nil, err
		}
		// A missing time is named in the unit of the state's other time.
		if fs.ExitLatencyUs == nil {
			return nil, bad(field+"."+missingKey("exit_latency", fs.TargetResidencyUs, fs.TargetResidencyNs), "missing")
		}
		if fs.TargetResidencyUs == nil {
			return nil, bad(field+"."+missingKey("target_residency", fs.ExitLatencyUs, fs.ExitLatencyNs), "missing")
		}
		// Errors name a time as the file spells it, in its unit.
		exitKey, resKey := spelled("exit_latency", fs.ExitLatencyNs), spelled("target_residency", fs.TargetResidencyNs)
		for _, f := range []struct {
			key timeKey
			v   float64
		}{{exitKey, *fs.ExitLatencyUs}, {resKey, *fs.TargetResidencyUs}} {
			if math.IsNaN(f.v) || f.v < 0 {
				return nil, bad(field+"."+f.key.name, "must be >= 0")
			}
			if f.v > 1e7 {
				return nil, bad(field+"."+f.key.name, "%s is more than 10 s", f.key.show(f.v))
			}
		}
		if fs.Polling && i != 0 {
			return nil, bad(field+".polling", "only state 0 may be a polling state")
		}
		// Times in the wrong unit read as states no machine has: noted,
		// not refused (the table is the user's to state).
		for _, f := range []struct {
			key timeKey
			v   float64
		}{{exitKey, *fs.ExitLatencyUs}, {resKey, *fs.TargetResidencyUs}} {
			if f.key.ns && !fs.Polling && f.v > 0 && f.v < 1 || !f.key.ns && f.v > 100_000 {
				units = append(units, fmt.Sprintf("%s's %s %s", fs.Name, f.key.name, f.key.show(f.v)))
			}
		}
		st := State{Name: fs.Name, Desc: fs.Desc, ExitLatencyNs: usToNs(*fs.ExitLatencyUs),
			TargetResidencyNs: usToNs(*fs.TargetResidencyUs), Polling: fs.Polling, Disabled: fs.Disabled}
		// The governors walk the table from shallow to deep and stop at
		// the first state too slow or too long: a table out of order
		// would be read wrong, silently.
		if i > 0 {
			prev := p.States[i-1]
			if st.ExitLatencyNs < prev.ExitLatencyNs {
				return nil, bad(field+"."+exitKey.name, "%s is below states[%d] (%s)'s %s: states go from the shallowest to the deepest", exitKey.show(*fs.ExitLatencyUs), i-1, prev.Name, exitKey.show(float64(prev.ExitLatencyNs)/1000))
			}
			if st.TargetResidencyNs < prev.TargetResidencyNs {
				return nil, bad(field+"."+resKey.name, "%s is below states[%d] (%s)'s %s: states go from the shallowest to the deepest", resKey.show(*fs.TargetResidencyUs), i-1, prev.Name, resKey.show(float64(prev.TargetResidencyNs)/1000))
			}
		}
		// A given power is used, power_estimated or not: a file written
		// by `profiles --format json` marks every power estimated, and one
		// edited there is the user's. It stays marked estimated only
		// where it still is the estimate of the state as given.
		if fs.Power != nil {
			if math.IsNaN(*fs.Power) || *fs.Power < 0 || *fs.Power > 2 {
				return nil, bad(field+".power", "must be between 0 and 2 (1.0 = a busy core)")
			}
			st.Power = *fs.Power
			est := EstimatePower(st)
			st.PowerEstimated = fs.PowerEstimated && math.Abs(st.Power-est) < 1e-9
			if fs.PowerEstimated && !st.PowerEstimated { // edited, the power or the times
				doubts = append(doubts, fmt.Sprintf("%s's power %g, marked estimated, is not the estimate of its times (%.3g): used as given; leave it out to estimate it again", fs.Name, st.Power, est))
			}
		} else {
			st.Power, st.PowerEstimated = EstimatePower(st), true
			estimated = true
		}
		p.States = append(p.States, st)
	}
	p.Source = "file " + label
	if fp.Source != "" {
		p.Source += " (" + fp.Source + ")"
	}
	if len(units) > 0 {
		p.Source += "; check the units of " + strings.Join(units, ", ") + ": no idle state takes under 1 µs or over 100 ms to exit or to pay off"
	}
	for _, d := range doubts {
		p.Source += "; " + d
	}
	if estimated {
		p.Source += "; power estimated where not given"
	}
	p.Source += hzNote
	return p, nil
}

func jsonErr(label, field string, err error) error {
	prefix := "profile " + label + ": "
	if field != "" {
		prefix += field + ": "
	}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("%sinvalid JSON at byte %d: %v", prefix, se.Offset, se)
	case errors.As(err, &te):
		f := te.Field
		if field != "" && f != "" {
			return fmt.Errorf("profile %s: %s.%s: %s", label, field, f, typeMismatch(te))
		}
		if f != "" {
			return fmt.Errorf("profile %s: %s: %s", label, f, typeMismatch(te))
		}
		return fmt.Errorf("%s%s", prefix, typeMismatch(te))
	case errors.Is(err, io.EOF):
		return fmt.Errorf("%sempty file", prefix)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%sinvalid JSON: unexpected end of file", prefix)
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	return fmt.Errorf("%s%s", prefix, msg)
}

// typeMismatch says a type error in JSON's words: the file's author wrote
// JSON, not the Go types it is decoded into.
func typeMismatch(te *json.UnmarshalTypeError) string {
	want := jsonType(te.Type)
	num, isNum := strings.CutPrefix(te.Value, "number ")
	if !isNum {
		got := map[string]string{"string": "a string", "number": "a number", "bool": "a boolean",
			"array": "an array", "object": "an object", "null": "null"}[te.Value]
		return fmt.Sprintf("must be %s, not %s", want, cmp.Or(got, te.Value))
	}
	// A number the type cannot hold: a fraction for an integer, a negative
	// for an unsigned one, else too large (or a map key that is no number).
	f, err := strconv.ParseFloat(num, 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange):
		return fmt.Sprintf("must be %s, not %q", want, num)
	case strings.ContainsAny(num, "eE") && want != "a number" && f == math.Trunc(f):
		// 1e3 is a whole number all the same: only its spelling is refused.
		return fmt.Sprintf("must be %s written without an exponent, not %s", want, num)
	case strings.ContainsAny(num, ".eE") && want != "a number",
		strings.HasPrefix(num, "-") && want == "a non-negative integer":
		return fmt.Sprintf("must be %s, not %s", want, num)
	}
	return fmt.Sprintf("%s is out of range", num)
}

// jsonType names the JSON type that decodes into t.
func jsonType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "another type"
}

// StateInfos is the profile's table as a trace records one (index order):
// what an import gives a capture without its own table.
func (p *Profile) StateInfos() []trace.StateInfo {
	out := make([]trace.StateInfo, 0, len(p.States))
	for i, s := range p.States {
		out = append(out, trace.StateInfo{Index: i, Name: s.Name, Desc: s.Desc, ExitLatencyNs: s.ExitLatencyNs,
			TargetResidencyNs: s.TargetResidencyNs, Disabled: s.Disabled, Polling: s.Polling})
	}
	return out
}
