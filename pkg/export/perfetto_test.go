package export

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/idletrace/idletrace/internal/tracetest"
	"github.com/idletrace/idletrace/pkg/analysis"
	"github.com/idletrace/idletrace/pkg/trace"
)

// TestPBEncoders: each encoder writes the wire format's bytes, a nested
// message its length in front of it, however long (a length of 128 or
// more takes a second byte, which end moves the message for).
func TestPBEncoders(t *testing.T) {
	long := strings.Repeat("x", 200)
	for _, tc := range []struct {
		name  string
		build func(*pb)
		want  []byte
	}{
		{"uint", func(p *pb) { p.uint(1, 150) }, []byte{0x08, 0x96, 0x01}},
		{"uint 0", func(p *pb) { p.uint(2, 0) }, []byte{0x10, 0x00}},
		{"uint max", func(p *pb) { p.uint(1, 1<<64-1) }, []byte{0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
		{"field 60", func(p *pb) { p.uint(60, 1) }, []byte{0xe0, 0x03, 0x01}},
		{"int -1", func(p *pb) { p.int(4, -1) }, []byte{0x20, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
		{"fixed64", func(p *pb) { p.fixed64(47, 0x0102030405060708) }, []byte{0xf9, 0x02, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01}},
		{"string", func(p *pb) { p.str(23, "read") }, []byte{0xba, 0x01, 0x04, 'r', 'e', 'a', 'd'}},
		{"empty message", func(p *pb) { p.begin(1); p.end() }, []byte{0x0a, 0x00}},
		{"nested", func(p *pb) {
			p.begin(1)
			p.uint(1, 3)
			p.begin(13)
			p.uint(1, 1)
			p.uint(2, 3)
			p.endAll()
		}, []byte{0x0a, 0x08, 0x08, 0x03, 0x6a, 0x04, 0x08, 0x01, 0x10, 0x03}},
		{"long nested", func(p *pb) {
			p.begin(1)
			p.begin(2)
			p.str(3, long)
			p.end()
			p.uint(4, 1)
			p.end()
		},
			append(append([]byte{0x0a, 0xd0, 0x01, 0x12, 0xcb, 0x01, 0x1a, 0xc8, 0x01}, long...), 0x20, 0x01)},
		{"annotation by name_iid", func(p *pb) { p.begin(4); p.uint(1, 3); p.uint(3, 4096); p.end() }, []byte{0x22, 0x05, 0x08, 0x03, 0x18, 0x80, 0x20}},
	} {
		var p pb
		p.b = append(p.b, 0xee) // what came before stays
		tc.build(&p)
		if want := append([]byte{0xee}, tc.want...); !bytes.Equal(p.b, want) || len(p.open) != 0 {
			t.Errorf("%s: % x (%d open), want % x", tc.name, p.b, len(p.open), want)
		}
	}
}

// TestPerfettoInterning: a name gets an iid the first time it is used, the
// same one after, and goes into the InternedData of the packet that first
// uses it only: the packet's bytes, field by field.
func TestPerfettoInterning(t *testing.T) {
	var buf bytes.Buffer
	f := &perfettoWriter{}
	f.out = bufio.NewWriter(&buf)
	packet := func(name string, sector uint64) []byte {
		buf.Reset()
		f.trackEvent(5, typeInstant, 9, name)
		f.annUint("sector", sector)
		if err := f.writePacket(); err != nil {
			t.Fatal(err)
		}
		f.out.Flush()
		return slices.Clone(buf.Bytes())
	}
	first, second, other := packet("read", 1), packet("read", 2), packet("write", 3)
	want := func(iid, sector byte, interned ...byte) []byte { // the event name's iid, the annotation's value
		event := []byte{0x48, typeInstant, 0x58, 9, 0x50, iid, 0x22, 0x04, 0x08, 0x01, 0x18, sector}
		p := append([]byte{0x40, 5, 0x50, sequenceID, 0x68, seqNeedsIncrementalState, 0x5a, byte(len(event))}, event...)
		if len(interned) > 0 {
			p = append(append(p, 0x62, byte(len(interned))), interned...)
		}
		return append([]byte{0x0a, byte(len(p))}, p...)
	}
	entry := func(field, iid byte, name string) []byte {
		return append([]byte{field, byte(4 + len(name)), 0x08, iid, 0x12, byte(len(name))}, name...)
	}
	for _, tc := range []struct {
		name      string
		got, want []byte
	}{
		{"first use: the event name and the annotation name interned", first,
			want(1, 1, append(entry(0x12, 1, "read"), entry(0x1a, 1, "sector")...)...)},
		{"the same names again: nothing interned", second, want(1, 2)},
		{"a new event name only", other, want(2, 3, entry(0x12, 2, "write")...)},
	} {
		if !bytes.Equal(tc.got, tc.want) {
			t.Errorf("%s:\n got % x\nwant % x", tc.name, tc.got, tc.want)
		}
	}
}

// fieldSpec is one field of Perfetto's messages as its protos define
// it, written out here from those protos (not from the writer's names):
// the decoder holds the file to it.
type fieldSpec struct {
	name     string
	typ      protowire.Type
	msg      string // a nested message's type
	repeated bool
}

var perfettoLayout = map[string]map[protowire.Number]fieldSpec{
	"Trace": {1: {"packet", protowire.BytesType, "TracePacket", true}},
	"TracePacket": {
		1:  {"ftrace_events", protowire.BytesType, "FtraceEventBundle", false},
		8:  {"timestamp", protowire.VarintType, "", false},
		10: {"trusted_packet_sequence_id", protowire.VarintType, "", false},
		11: {"track_event", protowire.BytesType, "TrackEvent", false},
		12: {"interned_data", protowire.BytesType, "InternedData", false},
		13: {"sequence_flags", protowire.VarintType, "", false},
		60: {"track_descriptor", protowire.BytesType, "TrackDescriptor", false},
	},
	"InternedData": {
		2: {"event_names", protowire.BytesType, "EventName", true},
		3: {"debug_annotation_names", protowire.BytesType, "DebugAnnotationName", true},
	},
	"EventName": {
		1: {"iid", protowire.VarintType, "", false},
		2: {"name", protowire.BytesType, "string", false},
	},
	"DebugAnnotationName": {
		1: {"iid", protowire.VarintType, "", false},
		2: {"name", protowire.BytesType, "string", false},
	},
	"FtraceEventBundle": {
		1: {"cpu", protowire.VarintType, "", false},
		2: {"event", protowire.BytesType, "FtraceEvent", true},
	},
	"FtraceEvent": {
		1:  {"timestamp", protowire.VarintType, "", false},
		2:  {"pid", protowire.VarintType, "", false},
		13: {"cpu_idle", protowire.BytesType, "CpuIdleFtraceEvent", false},
	},
	"CpuIdleFtraceEvent": {
		1: {"state", protowire.VarintType, "", false},
		2: {"cpu_id", protowire.VarintType, "", false},
	},
	"TrackDescriptor": {
		1:  {"uuid", protowire.VarintType, "", false},
		2:  {"name", protowire.BytesType, "string", false},
		5:  {"parent_uuid", protowire.VarintType, "", false},
		11: {"child_ordering", protowire.VarintType, "", false},
		12: {"sibling_order_rank", protowire.VarintType, "", false},
		14: {"description", protowire.BytesType, "string", false},
		8:  {"counter", protowire.BytesType, "CounterDescriptor", false},
	},
	"CounterDescriptor": {
		6: {"unit_name", protowire.BytesType, "string", false},
	},
	"TrackEvent": {
		4:  {"debug_annotations", protowire.BytesType, "DebugAnnotation", true},
		9:  {"type", protowire.VarintType, "", false},
		10: {"name_iid", protowire.VarintType, "", false},
		11: {"track_uuid", protowire.VarintType, "", false},
		23: {"name", protowire.BytesType, "string", false},
		30: {"counter_value", protowire.VarintType, "", false},
		47: {"flow_ids", protowire.Fixed64Type, "", true},
		48: {"terminating_flow_ids", protowire.Fixed64Type, "", true},
	},
	"DebugAnnotation": {
		1:  {"name_iid", protowire.VarintType, "", false},
		3:  {"uint_value", protowire.VarintType, "", false},
		4:  {"int_value", protowire.VarintType, "", false},
		6:  {"string_value", protowire.BytesType, "string", false},
		10: {"name", protowire.BytesType, "string", false},
	},
}

// msg is a decoded message: its fields by name, each occurrence's value
// (a number, a string, a nested message).
type msg map[string][]any

func (m msg) has(f string) bool { return len(m[f]) > 0 }

func (m msg) uint(f string) uint64 {
	if v := m[f]; len(v) > 0 {
		return v[len(v)-1].(uint64)
	}
	return 0
}

func (m msg) str(f string) string {
	if v := m[f]; len(v) > 0 {
		return v[len(v)-1].(string)
	}
	return ""
}

func (m msg) sub(f string) msg {
	if v := m[f]; len(v) > 0 {
		return v[len(v)-1].(msg)
	}
	return nil
}

// decodePB parses b as a message of type typ with protowire and fails on
// a field the layout does not have, a wire type other than the layout's,
// a field that is not repeated given twice, a string that is not UTF-8.
func decodePB(typ string, b []byte) (msg, error) {
	layout, ok := perfettoLayout[typ]
	if !ok {
		return nil, fmt.Errorf("no message %s in the layout", typ)
	}
	m := msg{}
	for len(b) > 0 {
		num, wt, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, fmt.Errorf("%s: bad tag: %v", typ, protowire.ParseError(n))
		}
		b = b[n:]
		spec, ok := layout[num]
		if !ok {
			return nil, fmt.Errorf("%s: field %d is none the writer claims", typ, num)
		}
		if wt != spec.typ {
			return nil, fmt.Errorf("%s.%s: wire type %d, want %d", typ, spec.name, wt, spec.typ)
		}
		var v any
		switch wt {
		case protowire.VarintType:
			x, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return nil, fmt.Errorf("%s.%s: %v", typ, spec.name, protowire.ParseError(n))
			}
			v, b = x, b[n:]
		case protowire.Fixed64Type:
			x, n := protowire.ConsumeFixed64(b)
			if n < 0 {
				return nil, fmt.Errorf("%s.%s: %v", typ, spec.name, protowire.ParseError(n))
			}
			v, b = x, b[n:]
		case protowire.BytesType:
			x, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, fmt.Errorf("%s.%s: %v", typ, spec.name, protowire.ParseError(n))
			}
			b = b[n:]
			if spec.msg == "string" {
				if !utf8.Valid(x) {
					return nil, fmt.Errorf("%s.%s: not UTF-8: %q", typ, spec.name, x)
				}
				v = string(x)
			} else {
				sub, err := decodePB(spec.msg, x)
				if err != nil {
					return nil, err
				}
				v = sub
			}
		}
		if !spec.repeated && m.has(spec.name) {
			return nil, fmt.Errorf("%s.%s given twice", typ, spec.name)
		}
		m[spec.name] = append(m[spec.name], v)
	}
	return m, nil
}

// perfettoFile is what a Perfetto export holds, as its decoder reads it.
type perfettoFile struct {
	packets, events int
	// Per "cpu/state index": cpu_idle entries and the time to their exits.
	periods map[string][2]uint64
	tracks  map[uint64]msg // the TrackDescriptors, by uuid
	// slices: IO slices, per name (the op); instants per track name prefix.
	slices    map[string]int
	instants  map[string]int
	wakeNames map[string]int             // the wake-ups' instants, by name
	counters  map[string][]counterSample // counter tracks' values, by track name
	// Flows: wake requests' and IO's, each begun and ended once.
	wakeFlows, ioFlows int
	maxLanes           int
	firstTS, lastTS    uint64
}

// counterSample is a counter track's value from an instant on.
type counterSample struct {
	ns uint64
	v  int64
}

// flowEnd is one end of a flow: where and when.
type flowEnd struct {
	track uint64
	ns    uint64
}

// readPerfetto decodes a Perfetto export packet by packet and checks what
// a reader relies on: one payload a packet; every TrackEvent on sequence
// 1, whose first packet clears its incremental state, with a timestamp, on
// a track described before it; each CPU's cpu_idle events in time order,
// entries and exits alternating, each bundle's CPU its events' cpu_id;
// slices on each track nesting (here: never overlapping), every flow
// begun once and ended once, after its start; every interned name given
// once, with an iid from 1 not given before, in or before the first packet
// that uses it, which says it needs the sequence's incremental state. The
// names are resolved in place (a TrackEvent's and each annotation's "name").
func readPerfetto(t testing.TB, data []byte) perfettoFile {
	t.Helper()
	f := perfettoFile{periods: map[string][2]uint64{}, tracks: map[uint64]msg{}, slices: map[string]int{}, instants: map[string]int{}, wakeNames: map[string]int{}, counters: map[string][]counterSample{}}
	open := map[uint32]uint64{}     // per CPU: the entry's time
	state := map[uint32]uint64{}    // and state
	lastIdle := map[uint32]uint64{} // its last cpu_idle's time
	openSlice := map[uint64]uint64{}
	lastOnTrack := map[uint64]uint64{}
	starts, ends := map[uint64]flowEnd{}, map[uint64]flowEnd{}
	lanes := map[string]int{}
	seqStarted := false
	names := map[string]map[uint64]string{"event_names": {}, "debug_annotation_names": {}}
	given := map[string]map[string]bool{"event_names": {}, "debug_annotation_names": {}}
	resolve := func(index string, m msg, p msg) {
		if !m.has("name_iid") {
			return
		}
		if m.has("name") {
			t.Fatalf("packet %d: both a name and a name_iid: %v", f.packets, m)
		}
		if p.uint("sequence_flags")&seqNeedsIncrementalState == 0 {
			t.Fatalf("packet %d: uses an interned name without SEQ_NEEDS_INCREMENTAL_STATE", f.packets)
		}
		name, ok := names[index][m.uint("name_iid")]
		if !ok {
			t.Fatalf("packet %d: %s iid %d not interned before", f.packets, index, m.uint("name_iid"))
		}
		m["name"] = []any{name}
	}
	b := data
	for len(b) > 0 {
		num, wt, n := protowire.ConsumeTag(b)
		if n < 0 || num != 1 || wt != protowire.BytesType {
			t.Fatalf("at byte %d: not a Trace.packet field (%d, %d, %d)", len(data)-len(b), num, wt, n)
		}
		b = b[n:]
		raw, n := protowire.ConsumeBytes(b)
		if n < 0 {
			t.Fatalf("at byte %d: %v", len(data)-len(b), protowire.ParseError(n))
		}
		b = b[n:]
		p, err := decodePB("TracePacket", raw)
		if err != nil {
			t.Fatalf("packet %d: %v", f.packets, err)
		}
		f.packets++
		payloads := 0
		for _, k := range []string{"ftrace_events", "track_event", "track_descriptor"} {
			if p.has(k) {
				payloads++
			}
		}
		if payloads != 1 {
			t.Fatalf("packet %d: %d payloads: %v", f.packets, payloads, p)
		}
		if in := p.sub("interned_data"); in != nil {
			if !p.has("track_event") {
				t.Fatalf("packet %d: interned data without a TrackEvent that uses it", f.packets)
			}
			for index := range names {
				for _, v := range in[index] {
					e := v.(msg)
					iid, name := e.uint("iid"), e.str("name")
					if _, dup := names[index][iid]; dup || iid == 0 || given[index][name] {
						t.Fatalf("packet %d: %s: %q as iid %d, given before or iid 0", f.packets, index, name, iid)
					}
					names[index][iid], given[index][name] = name, true
				}
			}
		}
		if e := p.sub("track_event"); e != nil {
			resolve("event_names", e, p)
			for _, v := range e["debug_annotations"] {
				resolve("debug_annotation_names", v.(msg), p)
			}
		}
		if p.has("track_event") || p.has("track_descriptor") {
			if p.uint("trusted_packet_sequence_id") != 1 {
				t.Fatalf("packet %d: sequence %d", f.packets, p.uint("trusted_packet_sequence_id"))
			}
			if !seqStarted && p.uint("sequence_flags")&1 == 0 {
				t.Fatalf("packet %d: the sequence's first packet does not clear its incremental state", f.packets)
			}
			seqStarted = true
		}
		if d := p.sub("track_descriptor"); d != nil {
			uuid := d.uint("uuid")
			if _, dup := f.tracks[uuid]; dup || uuid == 0 || !d.has("name") {
				t.Fatalf("track %d described twice, or without a uuid or name: %v", uuid, d)
			}
			if d.has("parent_uuid") && f.tracks[d.uint("parent_uuid")] == nil {
				t.Fatalf("track %v: its parent is not described", d)
			}
			f.tracks[uuid] = d
			lanes[d.str("name")]++
			f.maxLanes = max(f.maxLanes, lanes[d.str("name")])
		}
		if bundle := p.sub("ftrace_events"); bundle != nil {
			cpu := uint32(bundle.uint("cpu"))
			for _, v := range bundle["event"] {
				e := v.(msg)
				f.events++
				idle := e.sub("cpu_idle")
				ns := e.uint("timestamp")
				if idle == nil || !e.has("timestamp") || !e.has("pid") || e.uint("pid") != 0 || uint32(idle.uint("cpu_id")) != cpu || !idle.has("state") {
					t.Fatalf("bundle of CPU %d: event %v", cpu, e)
				}
				if ns < lastIdle[cpu] {
					t.Fatalf("CPU %d: cpu_idle at %d after %d", cpu, ns, lastIdle[cpu])
				}
				lastIdle[cpu] = ns
				f.span(ns)
				entry, isOpen := open[cpu]
				switch s := idle.uint("state"); {
				case s == cpuIdleExit && isOpen:
					k := fmt.Sprintf("%d/%d", cpu, state[cpu])
					f.periods[k] = [2]uint64{f.periods[k][0] + 1, f.periods[k][1] + ns - entry}
					delete(open, cpu)
				case s != cpuIdleExit && !isOpen:
					open[cpu], state[cpu] = ns, s
				default:
					t.Fatalf("CPU %d at %d: state %d; entries and exits do not alternate", cpu, ns, s)
				}
			}
		}
		if e := p.sub("track_event"); e != nil {
			f.events++
			ns, track := p.uint("timestamp"), e.uint("track_uuid")
			d := f.tracks[track]
			if !p.has("timestamp") || d == nil {
				t.Fatalf("packet %d: a TrackEvent without a timestamp or on a track not described: %v", f.packets, e)
			}
			f.span(ns)
			name := d.str("name")
			if ns < lastOnTrack[track] && name != "wake requests" {
				t.Fatalf("track %q: event at %d after %d", name, ns, lastOnTrack[track])
			}
			lastOnTrack[track] = max(lastOnTrack[track], ns)
			switch e.uint("type") {
			case typeSliceBegin:
				if _, busy := openSlice[track]; busy {
					t.Fatalf("track %d (%s): a slice begins at %d inside another", track, name, ns)
				}
				openSlice[track] = ns
				f.slices[e.str("name")]++
				for _, k := range []string{"device", "sector", "bytes", "op"} {
					if !annotated(e, k) {
						t.Fatalf("IO slice %v: no %s", e, k)
					}
				}
			case typeSliceEnd:
				if _, busy := openSlice[track]; !busy {
					t.Fatalf("track %d (%s): an end at %d with no slice open", track, name, ns)
				}
				delete(openSlice, track)
			case typeCounter:
				if d.sub("counter") == nil || !e.has("counter_value") {
					t.Fatalf("track %q: a counter event %v on a track that is no counter, or without a value", name, e)
				}
				f.counters[name] = append(f.counters[name], counterSample{ns, int64(e.uint("counter_value"))})
			case typeInstant:
				f.instants[strings.TrimRight(name, "0123456789 ")]++
				if strings.HasPrefix(name, "wake-ups") {
					f.wakeNames[e.str("name")]++
				}
			default:
				t.Fatalf("TrackEvent type %d", e.uint("type"))
			}
			for _, v := range e["flow_ids"] {
				id := v.(uint64)
				if _, dup := starts[id]; dup {
					t.Fatalf("flow %d begins twice", id)
				}
				starts[id] = flowEnd{track, ns}
			}
			for _, v := range e["terminating_flow_ids"] {
				id := v.(uint64)
				if _, dup := ends[id]; dup {
					t.Fatalf("flow %d ends twice", id)
				}
				ends[id] = flowEnd{track, ns}
			}
		}
	}
	if len(open) != 0 || len(openSlice) != 0 {
		t.Errorf("left open at the end: periods %v, slices %v", open, openSlice)
	}
	for id, s := range starts {
		e, ok := ends[id]
		switch {
		case !ok || e.ns < s.ns:
			t.Errorf("flow %d: from %+v to %+v", id, s, e)
		case s.track == requestTrack:
			f.wakeFlows++
			if !strings.HasPrefix(f.tracks[e.track].str("name"), "wake-ups cpu ") {
				t.Errorf("wake flow %d ends on %q", id, f.tracks[e.track].str("name"))
			}
		default:
			f.ioFlows++
		}
	}
	if len(ends) != len(starts) {
		t.Errorf("%d flows begun, %d ended", len(starts), len(ends))
	}
	return f
}

func (f *perfettoFile) span(ns uint64) {
	if f.firstTS == 0 || ns < f.firstTS {
		f.firstTS = ns
	}
	f.lastTS = max(f.lastTS, ns)
}

func annotated(e msg, name string) bool {
	for _, v := range e["debug_annotations"] {
		if v.(msg).str("name") == name {
			return true
		}
	}
	return false
}

// perfettoOf exports path as a Perfetto trace with o and decodes it.
func perfettoOf(t testing.TB, path string, o Options) (perfettoFile, Summary) {
	t.Helper()
	data, sum := eventsOf(t, path, o, WritePerfetto)
	f := readPerfetto(t, data)
	if uint64(f.events) != sum.Events {
		t.Errorf("%d events decoded, the summary says %d", f.events, sum.Events)
	}
	return f, sum
}

// TestPerfettoStats: the bundled trace's Perfetto export, made with
// --stats-window, decoded against the layout: its cpu_idle events give
// stats' usage and time per CPU and state (the trace has no cpuidle
// driver: stats' time is the traced time), its IO slices stats' requests,
// its wake flows the periods a remote wake request ended.
func TestPerfettoStats(t *testing.T) {
	s := statsOf(t, bundledTrace)
	f, sum := perfettoOf(t, bundledTrace, Options{StatsWindow: true})
	r, err := trace.Open(bundledTrace)
	if err != nil {
		t.Fatal(err)
	}
	rules := analysis.NewRules(r.Meta, r.End)
	r.Close()
	got := map[string][2]uint64{}
	perCPU := map[int][2]uint64{}
	for k, v := range f.periods {
		var cpu, state int
		fmt.Sscanf(k, "%d/%d", &cpu, &state)
		got[key(int64(cpu), rules.StateName(cpu, state))] = v
		perCPU[cpu] = [2]uint64{perCPU[cpu][0] + v[0], perCPU[cpu][1] + v[1]}
	}
	want := map[string][2]uint64{}
	for _, c := range s.CPUs {
		var usage, ns uint64
		for _, st := range c.States {
			if st.Usage > 0 || st.TimeNs > 0 {
				want[key(int64(c.CPU), st.Name)] = [2]uint64{st.Usage, st.TimeNs}
			}
			usage += st.Usage
			ns += st.TimeNs
		}
		t.Logf("CPU %d: %d cpu_idle entries, %d ns to their exits; stats: usage %d, time %d ns", c.CPU, perCPU[c.CPU][0], perCPU[c.CPU][1], usage, ns)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("per CPU and state (periods, ns):\n got %v\nwant %v (stats)", got, want)
	}
	ioSlices := 0
	for _, n := range f.slices {
		ioSlices += n
	}
	if uint64(ioSlices) != s.IO.Requests || uint64(f.ioFlows) != s.IO.Requests || f.instants["block IO cpu"] != ioSlices {
		t.Errorf("%d IO slices, %d IO flows, %d completions; stats: %d requests", ioSlices, f.ioFlows, f.instants["block IO cpu"], s.IO.Requests)
	}
	var measured uint64
	for _, l := range s.WakeLatencyNs {
		measured += l.Count
	}
	if uint64(f.wakeFlows) != measured+s.WakeRequestedBeforeEntry || uint64(f.wakeFlows) != sum.Flows || f.wakeFlows == 0 {
		t.Errorf("%d wake flows (summary %d); stats: %d wake latencies measured, %d requested before the entry", f.wakeFlows, sum.Flows, measured, s.WakeRequestedBeforeEntry)
	}
	for cause, n := range s.WakeCauses.Counts {
		got := 0
		for name, k := range f.wakeNames {
			if name == cause || cause == "irq" && strings.HasPrefix(name, "irq ") {
				got += k
			}
		}
		if cause != "unknown" && uint64(got) != n {
			t.Errorf("wake cause %s: %d instants, stats %d", cause, got, n)
		}
	}
	t.Logf("%d packets, %d tracks (IO lanes at most %d), %v IO slices, %d wake flows, instants %v", f.packets, len(f.tracks), f.maxLanes, f.slices, f.wakeFlows, f.instants)
}

// TestPerfettoTables: with and without filters, the export holds the
// records the tables hold with the same options: per CPU and state the
// periods and their duration, the IO requests, a wake flow per period a
// remote wake request ended (wake_latency_ns or
// wake_requested_before_entry), an instant per known wake cause.
func TestPerfettoTables(t *testing.T) {
	synth := writeSynth(t, t.TempDir(), 3_000)
	for _, tc := range []struct {
		path string
		o    Options
	}{
		{bundledTrace, Options{}},
		{bundledTrace, Options{CPUs: []int{1}, From: 500_000 * us, To: 1_500_000 * us, HasFrom: true, HasTo: true}},
		{synth, Options{}},
		{synth, Options{StatsWindow: true, CPUs: []int{1}}},
		{synth, Options{From: 20_000 * us, To: 80_000 * us, HasFrom: true, HasTo: true}},
	} {
		name := fmt.Sprintf("%s %+v", tc.path, tc.o)
		f, sum := perfettoOf(t, tc.path, tc.o)
		rows := exportTrace(t, tc.path, "csv", tc.o)
		if sum.IdlePeriods != rows.sum.IdlePeriods || sum.IORequests != rows.sum.IORequests {
			t.Errorf("%s: %d idle periods and %d IO requests, the tables %d and %d", name, sum.IdlePeriods, sum.IORequests, rows.sum.IdlePeriods, rows.sum.IORequests)
		}
		want := map[string][2]uint64{}
		flows, causes := 0, 0
		for _, r := range rows.idle {
			k := fmt.Sprintf("%d/%d", r.int(t, "cpu"), r.int(t, "state"))
			want[k] = [2]uint64{want[k][0] + 1, want[k][1] + uint64(r.int(t, "duration_ns"))}
			if !r.null("wake_latency_ns") || r.is("wake_requested_before_entry") {
				flows++
			}
			if c := r.str("wake_cause"); c != "" && c != "unknown" {
				causes++
			}
		}
		if fmt.Sprint(f.periods) != fmt.Sprint(want) {
			t.Errorf("%s: periods and ns per cpu/state\n got %v\nwant %v (the tables)", name, f.periods, want)
		}
		ioSlices := 0
		for _, n := range f.slices {
			ioSlices += n
		}
		wakes := 0
		for _, n := range f.wakeNames {
			wakes += n
		}
		if uint64(ioSlices) != sum.IORequests || f.ioFlows != ioSlices || f.wakeFlows != flows || wakes != causes {
			t.Errorf("%s: %d IO slices and flows %d (%d requests), %d wake flows (the tables: %d), %d wake-ups (%d)", name, ioSlices, f.ioFlows, sum.IORequests, f.wakeFlows, flows, wakes, causes)
		}
		if tc.path == synth && f.maxLanes > 4 {
			t.Errorf("%s: %d IO lanes on a CPU, for at most 2 requests in flight on it", name, f.maxLanes)
		}
		if tc.o.CPUs != nil {
			for uuid, d := range f.tracks {
				if n := d.str("name"); strings.HasPrefix(n, "wake-ups cpu ") && !slices.Contains(tc.o.CPUs, int(uuid>>24&0xffffff)) {
					t.Errorf("%s: track %q for a CPU not selected", name, n)
				}
			}
		}
		t.Logf("%s: %d packets, %d tracks, %d wake flows, %d IO", name, f.packets, len(f.tracks), f.wakeFlows, ioSlices)
	}
}

// A trace's PM QoS changes become counter tracks: the global limit's and
// each changed CPU's resume latency, in µs with -1 for none, from the
// value in force where the export's window opens.
func TestPerfettoPMQoS(t *testing.T) {
	meta := &trace.Metadata{KernelRelease: "6.12.0", HZ: 250, NumCPUs: 2, RecordedCPUs: []int{0, 1}}
	meta.Inputs.PMQoSTrace = true
	r := tracetest.Build(t, meta, tracetest.Periods(20, 2, 1, 25e6, 5e6), []trace.PMQoSChange{
		{TimeNs: 1_100_000_000, CPU: trace.PMQoSGlobal, LimitUs: 2, PrevUs: trace.PMQoSNoGlobalLimitUs, Action: trace.PMQoSAdd},
		{TimeNs: 1_200_000_000, CPU: 1, LimitUs: 0, PrevUs: 15},
		{TimeNs: 1_300_000_000, CPU: 1, LimitUs: -1, PrevUs: 0, Action: trace.PMQoSRemove},
		{TimeNs: 1_400_000_000, CPU: trace.PMQoSGlobal, LimitUs: trace.PMQoSNoGlobalLimitUs, PrevUs: 2, Action: trace.PMQoSRemove},
	})
	start := TraceStart(r) // the first period's entry, 1 s
	for _, tc := range []struct {
		name string
		o    Options
		want map[string][]counterSample
	}{
		{"all", Options{}, map[string][]counterSample{
			"PM QoS CPU latency limit":    {{start, -1}, {1_100_000_000, 2}, {1_400_000_000, -1}},
			"PM QoS resume latency cpu 1": {{start, 15}, {1_200_000_000, 0}, {1_300_000_000, -1}},
		}},
		// From 150 ms on, CPU 0 only: the global limit as it stood then,
		// no track of CPU 1's.
		{"window", Options{From: 150 * time.Millisecond, HasFrom: true, CPUs: []int{0}}, map[string][]counterSample{
			"PM QoS CPU latency limit": {{start + 150_000_000, 2}, {1_400_000_000, -1}},
		}},
	} {
		var out bytes.Buffer
		if _, err := WritePerfetto(r, tc.o, &out); err != nil {
			t.Fatal(err)
		}
		got := readPerfetto(t, out.Bytes()).counters
		if !maps.EqualFunc(got, tc.want, slices.Equal) {
			t.Errorf("%s: counter tracks %v, want %v", tc.name, got, tc.want)
		}
	}
}
