package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idletrace/idletrace/pkg/analysis"
	"github.com/idletrace/idletrace/pkg/export"
	"github.com/idletrace/idletrace/pkg/host"
	"github.com/idletrace/idletrace/pkg/trace"
)

func runInfo(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("info", stderr)
	format := fs.String("format", "text", "output format: text or json")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := checkFormat(*format, "text", "json"); err != nil {
		return err
	}
	path, err := oneFile(pos)
	if err != nil {
		return err
	}
	r, err := openTrace(path, stderr)
	if err != nil {
		return err
	}
	defer r.Close()
	// info reads few chunks: the others are checked, so that damage is
	// said here too.
	if err := r.Verify(); err != nil {
		return err
	}
	r.printWarnings()
	qos, nQoS, err := r.PMQoSChanges(maxInfoPMQoS)
	if err != nil {
		return err
	}
	// The account every command prints, from the end record's counters
	// (or, cut short, the last loss chunk's).
	var loss trace.LossAccount
	if r.End != nil {
		loss = trace.NewLossAccount(r.End.Loss, r.Meta.Start, r.End)
	} else {
		loss = trace.NewLossAccount(r.Losses(), r.Meta.Start, nil)
	}
	if *format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Metadata *trace.Metadata `json:"metadata"`
			// End is the end record as the recorder wrote it (its raw
			// counts: io_in_flight holds the undelivered completions'
			// requests too); LossAccount is what they come to, as the
			// text's loss line and stats' loss give it.
			End         *infoEnd             `json:"end"`
			LossAccount trace.LossAccount    `json:"loss_account"`
			Chunks      []trace.ChunkSummary `json:"chunks"`
			// PMQoSChanges: the first maxInfoPMQoS of PMQoSChangeCount,
			// as the export's pm_qos_changes table has them.
			PMQoSChanges     []export.PMQoSChangeRow `json:"pm_qos_changes"`
			PMQoSChangeCount uint64                  `json:"pm_qos_change_count"`
			// Damage: what the damaged chunks held (stats' damage).
			Damage   trace.Damage `json:"damage"`
			Warnings []string     `json:"warnings"`
		}{r.Meta, infoEndOf(r.End), loss, r.Chunks(), export.PMQoSChangeRows(qos), nQoS, r.Damage(),
			append([]string{}, r.Warnings()...)}) // [] as stats has it, not null
	}
	m := r.Meta
	p := func(k, f string, a ...any) { fmt.Fprintf(stdout, "%-18s %s\n", k+":", fmt.Sprintf(f, a...)) }
	p("file", "%s (format v%d, %s)", path, m.FormatVersion, humanBytes(r.Size()))
	// An import's metadata holds what its capture said, often nothing of
	// the host: "unknown", not an empty field or the epoch.
	when, hz := "unknown time,", "unknown"
	if m.WallClock.UnixNs != 0 {
		when = time.Unix(0, m.WallClock.UnixNs).UTC().Format(time.RFC3339)
	}
	if m.HZ > 0 {
		hz = strconv.Itoa(m.HZ)
	}
	p("recorded", "%s by idletrace %s", when, cmp.Or(m.ToolVersion, "unknown")) // "unknown time, by idletrace dev"
	if len(m.Command) > 0 {
		quoted := make([]string, len(m.Command))
		for i, a := range m.Command {
			quoted[i] = analysis.ShellQuote(a) // sh -c 'exit 3', not sh -c exit 3
		}
		p("command", "%s", strings.Join(quoted, " "))
	}
	recorded := host.FormatCPUList(m.RecordedCPUs)
	if len(m.CameOnline) > 0 {
		recorded += "; " + host.FormatCPUList(m.CameOnline) + " from when it came online"
	}
	p("host", "%s, %s, %s (recorded: %s)", cmp.Or(m.Hostname, "unknown"), cmp.Or(m.CPUModel, "unknown"), analysis.Count(m.NumCPUs, "CPU"), recorded)
	p("kernel", "%s, HZ=%s, NO_HZ=%s", cmp.Or(m.KernelRelease, "unknown"), hz, cmp.Or(m.NoHZ, "unknown"))
	noDriver := m.NoCPUIdleDriver()
	if noDriver { // sysfs still names a governor, but none runs
		p("cpuidle", "driver none, no governor runs (sysfs names %s)", cmp.Or(m.CPUIdleGovernor, "unknown"))
	} else {
		p("cpuidle", "driver %s, governor %s", cmp.Or(m.CPUIdleDriver, "unknown"), cmp.Or(m.CPUIdleGovernor, "unknown"))
	}
	if len(m.States) > 0 {
		table := m.TableCPU()
		var names []string
		for _, s := range table.States {
			d := ""
			if s.Disabled {
				d = " disabled"
			}
			exit := strconv.FormatUint(s.ExitLatencyNs/1000, 10)
			if m.ExitLatenciesUnknown {
				exit = "?"
			}
			names = append(names, fmt.Sprintf("%s (%s/%d µs%s)", s.Name, exit, s.TargetResidencyNs/1000, d))
		}
		p(fmt.Sprintf("states (cpu%d)", table.CPU), "%s; exit latency/target residency", strings.Join(names, ", "))
	} else if noDriver {
		p("states", "none: no cpuidle driver, the kernel used its default idle routine (HLT)")
	} else {
		p("states", "unknown: the trace does not give the state table")
	}
	if m.HaltPoll != nil {
		p("haltpoll", "%s", trace.FormatHaltPoll(m.HaltPoll))
	}
	qosLine := "cpu_dma_latency=" + trace.PMQoSLimitString(trace.PMQoSGlobal, m.PMQoS.CPUDMALatencyUs)
	for c, v := range m.PMQoS.ResumeLatencyUs {
		if v >= 0 { // a CPU's constraint (-1: none)
			qosLine += fmt.Sprintf(", cpu%d resume latency %s", c, trace.PMQoSLimitString(int32(c), v))
		}
	}
	if noDriver { // the default idle routine reads neither limit
		qosLine += " (no effect: no cpuidle driver)"
	}
	p("pm qos", "%s", qosLine)
	if nQoS > 0 {
		p("pm qos changes", "%s", pmQoSChangesString(qos, nQoS, export.TraceStart(r.Reader)))
	} else if m.Inputs.PMQoSTrace {
		p("pm qos changes", "none")
	}
	fmt.Fprint(stdout, probeLines(m.Probes))
	if m.BPFObjectSHA256 != "" { // none in an import
		p("bpf object", "sha256 %s", m.BPFObjectSHA256)
	}
	for _, c := range r.Chunks() {
		span := ""
		if c.LastNs > c.FirstNs {
			span = fmt.Sprintf(", %.3fs", float64(c.LastNs-c.FirstNs)/1e9)
		}
		p("chunks "+c.Type.String(), "%d chunks, %d records, %s%s", c.Chunks, c.Records, humanBytes(c.Bytes), span)
	}
	if r.End != nil {
		p("end", "stop reason: %s; %s, %s; %s still open at stop (CPUs idle as recording ended)", r.End.StopReason,
			analysis.Count(r.End.IdlePeriods, "idle period"), analysis.Count(r.End.BlockIOs, "IO request"), analysis.Count(r.End.OpenPeriods, "idle period"))
		if len(m.Command) > 0 {
			if how := r.End.CommandEnded(m.Command[0]); how != "" {
				p("command end", "%s", how)
			}
		}
	}
	p("loss", "%s", loss)
	if d := r.Damage(); d.Any() {
		p("file damage", "%s", d)
	}
	return nil
}

// openTrace opens a trace and prints its warnings (truncation, damage)
// on stderr, each once: those found opening it at once, those its scans
// found (damaged chunks skipped) when it is closed.
func openTrace(path string, stderr io.Writer) (*traceFile, error) {
	r, err := trace.Open(path)
	if err != nil {
		return nil, err
	}
	t := &traceFile{Reader: r, stderr: stderr}
	t.printWarnings()
	return t, nil
}

// traceFile is a trace opened by a command.
type traceFile struct {
	*trace.Reader
	stderr io.Writer
}

func (t *traceFile) printWarnings() {
	for _, m := range t.Warnings() {
		if firstWarning(t.stderr, m) {
			fmt.Fprintln(t.stderr, "warning:", m)
		}
	}
}

// shownWarnings: a command that opens one trace more than once (whatif
// --measured, experiment) says each of its warnings once per stderr.
var shownWarnings struct {
	sync.Mutex
	seen map[string]bool
}

func firstWarning(stderr io.Writer, msg string) bool {
	key := fmt.Sprintf("%p\x00%s", stderr, msg)
	shownWarnings.Lock()
	defer shownWarnings.Unlock()
	if shownWarnings.seen[key] {
		return false
	}
	if shownWarnings.seen == nil {
		shownWarnings.seen = map[string]bool{}
	}
	shownWarnings.seen[key] = true
	return true
}

// Close prints the warnings not printed yet and closes the trace.
func (t *traceFile) Close() error {
	t.printWarnings()
	return t.Reader.Close()
}

// maxInfoPMQoS is how many PM QoS changes info lists.
const maxInfoPMQoS = 64

// pmQoSChangesString lists changes as "+1.234s cpu_dma_latency 20 µs", each
// at its time since startNs (the trace's start: its snapshot, else its
// first record).
func pmQoSChangesString(qos []trace.PMQoSChange, n uint64, startNs uint64) string {
	parts := make([]string, 0, len(qos)+1)
	for _, q := range qos {
		what := "cpu_dma_latency"
		if q.CPU != trace.PMQoSGlobal {
			what = fmt.Sprintf("cpu%d resume latency", q.CPU)
		}
		at := ""
		if startNs > 0 && q.TimeNs >= startNs {
			at = fmt.Sprintf("+%.3fs ", float64(q.TimeNs-startNs)/1e9)
		}
		parts = append(parts, fmt.Sprintf("%s%s %s", at, what, q.String()))
	}
	if more := n - uint64(len(qos)); more > 0 {
		parts = append(parts, fmt.Sprintf("and %d more", more))
	}
	return fmt.Sprintf("%d: %s", n, strings.Join(parts, ", "))
}

// infoWidth is where info's probes lines wrap.
const infoWidth = 100

// probeLines gives info's "probes:" lines: the probes grouped by how each
// was attached, or why not (tp_btf, tracepoint, imported: ..., in the
// capture, not imported, missing: ...), the attached first and the missing
// last, each group's names after its method and wrapped under it (a group
// is its first line and the lines indented two more under it; its names
// follow the method's last ": "), as a few lines rather than one of many
// hundreds of columns.
func probeLines(probes map[string]string) string {
	byMethod := map[string][]string{}
	for name, method := range probes {
		byMethod[method] = append(byMethod[method], name)
	}
	methods := slices.Collect(maps.Keys(byMethod))
	slices.SortFunc(methods, func(a, b string) int {
		return cmp.Or(cmp.Compare(probeRank(a), probeRank(b)), cmp.Compare(a, b))
	})
	var b strings.Builder
	prefix := fmt.Sprintf("%-18s ", "probes:")
	indent := strings.Repeat(" ", len(prefix))
	for _, method := range methods {
		names := byMethod[method]
		slices.Sort(names)
		words := strings.Fields(method + ":")
		for i, n := range names {
			if i < len(names)-1 {
				n += ","
			}
			words = append(words, n)
		}
		b.WriteString(analysis.WrapWords(words, infoWidth, prefix, indent+"  "))
		prefix = indent
	}
	if len(methods) == 0 {
		b.WriteString(prefix + "none\n")
	}
	return b.String()
}

// probeRank orders the methods: attached or imported, then known but not
// used ("in the capture, not imported"), then missing.
func probeRank(method string) int {
	switch {
	case strings.HasPrefix(method, "missing"):
		return 2
	case strings.Contains(method, "not imported"):
		return 1
	}
	return 0
}

// infoEnd is the end record as info's JSON gives it: the file keeps the
// loss counters under their Go names (format v1, read by every version),
// info's readers get them in the reports' snake_case.
type infoEnd struct {
	*trace.End
	Loss []infoLoss `json:"loss"`
}

// infoLoss is trace.Loss, field for field (a conversion checks it).
type infoLoss struct {
	CPU           uint32 `json:"cpu"`
	IdleLost      uint64 `json:"idle_lost"`
	IOLost        uint64 `json:"io_lost"`
	OtherLost     uint64 `json:"other_lost"`
	IOUnmatched   uint64 `json:"io_unmatched"`
	IOTableFull   uint64 `json:"io_table_full"`
	IOCompletions uint64 `json:"io_completions"`
	IOOrphaned    uint64 `json:"io_orphaned"`
	IdleUnpaired  uint64 `json:"idle_unpaired"`
	IOUnissued    uint64 `json:"io_unissued"`
}

func infoEndOf(e *trace.End) *infoEnd {
	if e == nil {
		return nil
	}
	out := &infoEnd{End: e, Loss: make([]infoLoss, len(e.Loss))}
	for i, l := range e.Loss {
		out.Loss[i] = infoLoss(l)
	}
	return out
}
