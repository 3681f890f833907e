package export

// The Perfetto trace: a trace's records in Perfetto's protobuf trace
// format (a Trace message: repeated TracePacket packet = 1), written with
// protowire straight from the field numbers below, which are those of
// Perfetto's protos (protos/perfetto/trace/: trace.proto,
// trace_packet.proto, ftrace/ftrace_event_bundle.proto,
// ftrace/ftrace_event.proto, ftrace/power.proto,
// track_event/track_event.proto, track_descriptor.proto,
// debug_annotation.proto, interned_data/interned_data.proto); no
// generated code, no copied .proto file.
//
//   - Idle periods: the kernel's own cpu_idle events (CpuIdleFtraceEvent
//     state and cpu_id, the entry's state and 4294967295 for the exit),
//     pid 0, in one FtraceEventBundle per CPU at a time, each CPU's in
//     time order: what Perfetto records from a kernel, and what its
//     trace processor turns into the per-CPU "cpuidle" counter tracks the
//     UI shows as CPU idle state.
//   - Block IO: TrackEvents on a track per CPU, "block IO cpu N", under a
//     parent track "idletrace": a slice (TYPE_SLICE_BEGIN at the issue,
//     TYPE_SLICE_END at the completion) on the issuing CPU's track, an
//     instant at the completion on the completing CPU's track, and a flow
//     from the one to the other. Requests in flight at once lie on sibling
//     tracks of the same name (lanes: TrackEvent slices on one track must
//     nest), which the UI merges into one track (TrackDescriptor's
//     sibling merge by name, its default) and the trace processor
//     multiplexes as it does any merged tracks. Debug annotations: on the
//     slice device, sector, bytes, op, the completing CPU and the task
//     where recorded; on the completion the issuing CPU, the latency and
//     the error.
//   - Wake-ups, where the trace has wake causes: an instant per idle
//     period's exit on "wake-ups cpu N" named by what ended it (timer,
//     tick, irq N, ipi-resched, ipi-call, remote-no-ipi, poll-timeout;
//     none for unknown; annotated with the state left), and, where the
//     trace has wake requests and a remote wake ended the period, a flow
//     from the request (an instant on the track "wake requests") to that
//     exit. The trace keeps when a
//     remote CPU asked the idle one to wake (an IPI send, sched_waking, a
//     no-IPI wake of a polling CPU), not which CPU asked: the requests
//     share one track instead of the sender's.
//   - PM QoS changes: a counter track for the global CPU latency limit and
//     one per CPU whose resume latency changed, in µs (-1: none), from the
//     value in force where the export's window opens.
//
// Timestamps are the trace's CLOCK_MONOTONIC nanoseconds, written with no
// clock id, so in Perfetto's default trace clock: the ftrace events and
// the TrackEvents share it. TrackEvents and TrackDescriptors are on one
// packet sequence (trusted_packet_sequence_id 1), whose first packet
// clears its incremental state. The TrackEvents' names and their debug
// annotations' names are interned (InternedData event_names and
// debug_annotation_names, interned_data.proto): each name is written once,
// in the packet that first uses it, and referred to by its iid after,
// every TrackEvent packet saying it needs the sequence's incremental state.
// (The bundled trace's export: 18.7 MB against 24.9 MB with the names
// written out, 19 bytes less a TrackEvent; values, such as a task's comm,
// stay strings.) The events come
// merged in time order (the timeline), but for wake requests made before
// events already written: Perfetto's trace processor sorts a file's
// events in any case.

import (
	"fmt"
	"io"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/idletrace/idletrace/pkg/trace"
)

// Perfetto is the format name of the Perfetto trace, PerfettoExt its file
// name extension (the one Perfetto's own tools write).
const (
	Perfetto    = "perfetto"
	PerfettoExt = ".pftrace"
)

// The messages' fields the writer writes: number, and in the comment the
// wire type and the field's name in Perfetto's protos.
const (
	// Trace
	pfTracePacket protowire.Number = 1 // bytes: repeated TracePacket packet

	// TracePacket
	pfPacketFtraceEvents    protowire.Number = 1  // bytes: FtraceEventBundle ftrace_events
	pfPacketTimestamp       protowire.Number = 8  // varint: uint64 timestamp
	pfPacketSequenceID      protowire.Number = 10 // varint: uint32 trusted_packet_sequence_id
	pfPacketTrackEvent      protowire.Number = 11 // bytes: TrackEvent track_event
	pfPacketInternedData    protowire.Number = 12 // bytes: InternedData interned_data
	pfPacketSequenceFlags   protowire.Number = 13 // varint: uint32 sequence_flags
	pfPacketTrackDescriptor protowire.Number = 60 // bytes: TrackDescriptor track_descriptor

	// InternedData
	pfInternedEventNames      protowire.Number = 2 // bytes: repeated EventName event_names
	pfInternedAnnotationNames protowire.Number = 3 // bytes: repeated DebugAnnotationName debug_annotation_names

	// EventName and DebugAnnotationName
	pfInternedIID  protowire.Number = 1 // varint: uint64 iid
	pfInternedName protowire.Number = 2 // bytes: string name

	// FtraceEventBundle
	pfBundleCPU   protowire.Number = 1 // varint: uint32 cpu
	pfBundleEvent protowire.Number = 2 // bytes: repeated FtraceEvent event

	// FtraceEvent
	pfFtraceTimestamp protowire.Number = 1  // varint: uint64 timestamp
	pfFtracePid       protowire.Number = 2  // varint: uint32 pid
	pfFtraceCPUIdle   protowire.Number = 13 // bytes: CpuIdleFtraceEvent cpu_idle

	// CpuIdleFtraceEvent
	pfCPUIdleState protowire.Number = 1 // varint: uint32 state
	pfCPUIdleCPUID protowire.Number = 2 // varint: uint32 cpu_id

	// TrackDescriptor
	pfTrackUUID          protowire.Number = 1  // varint: uint64 uuid
	pfTrackName          protowire.Number = 2  // bytes: string name
	pfTrackParentUUID    protowire.Number = 5  // varint: uint64 parent_uuid
	pfTrackChildOrdering protowire.Number = 11 // varint: ChildTracksOrdering child_ordering
	pfTrackSiblingRank   protowire.Number = 12 // varint: int32 sibling_order_rank
	pfTrackDescription   protowire.Number = 14 // bytes: string description
	pfTrackCounter       protowire.Number = 8  // bytes: CounterDescriptor counter

	// CounterDescriptor
	pfCounterUnitName protowire.Number = 6 // bytes: string unit_name

	// TrackEvent
	pfEventDebugAnnotation    protowire.Number = 4  // bytes: repeated DebugAnnotation debug_annotations
	pfEventType               protowire.Number = 9  // varint: Type type
	pfEventNameIID            protowire.Number = 10 // varint: uint64 name_iid
	pfEventTrackUUID          protowire.Number = 11 // varint: uint64 track_uuid
	pfEventCounterValue       protowire.Number = 30 // varint: int64 counter_value
	pfEventFlowIDs            protowire.Number = 47 // fixed64: repeated fixed64 flow_ids
	pfEventTerminatingFlowIDs protowire.Number = 48 // fixed64: repeated fixed64 terminating_flow_ids

	// DebugAnnotation
	pfAnnotationNameIID protowire.Number = 1 // varint: uint64 name_iid
	pfAnnotationUint    protowire.Number = 3 // varint: uint64 uint_value
	pfAnnotationInt     protowire.Number = 4 // varint: int64 int_value
	pfAnnotationString  protowire.Number = 6 // bytes: string string_value
)

// Enum values.
const (
	seqIncrementalStateCleared = 1 // TracePacket.SequenceFlags SEQ_INCREMENTAL_STATE_CLEARED
	seqNeedsIncrementalState   = 2 // SEQ_NEEDS_INCREMENTAL_STATE
	childOrderingExplicit      = 3 // TrackDescriptor.ChildTracksOrdering EXPLICIT
	typeSliceBegin             = 1 // TrackEvent.Type TYPE_SLICE_BEGIN
	typeSliceEnd               = 2 // TYPE_SLICE_END
	typeInstant                = 3 // TYPE_INSTANT
	typeCounter                = 4 // TYPE_COUNTER
)

// The writer's track uuids: the parent, the wake requests, and per CPU
// its wake-ups and its IO lanes (kind<<48 | cpu<<24 | lane).
const (
	sequenceID             = 1
	rootTrack       uint64 = 1
	requestTrack    uint64 = 2
	wakeTrackKind   uint64 = 1 << 48
	ioTrackKind     uint64 = 2 << 48
	qosTrackKind    uint64 = 3 << 48 // | target+1: the global limit 0, CPU N N+1
	maxLanes               = 1 << 24
	bundleMaxEvents        = 512 // cpu_idle events a CPU's bundle holds before it is written
)

// pb builds one message in the wire format: fields are appended, and a
// nested message is opened with begin and closed with end, which puts
// its length in front of it.
type pb struct {
	b    []byte
	open []int
}

func (p *pb) reset() { p.b, p.open = p.b[:0], p.open[:0] }

func (p *pb) begin(n protowire.Number) {
	p.b = protowire.AppendTag(p.b, n, protowire.BytesType)
	p.open = append(p.open, len(p.b))
}

func (p *pb) end() {
	start := p.open[len(p.open)-1]
	p.open = p.open[:len(p.open)-1]
	n := len(p.b) - start
	k := protowire.SizeVarint(uint64(n))
	for range k {
		p.b = append(p.b, 0)
	}
	copy(p.b[start+k:], p.b[start:start+n])
	protowire.AppendVarint(p.b[start:start], uint64(n))
}

// endAll closes every message still open.
func (p *pb) endAll() {
	for len(p.open) > 0 {
		p.end()
	}
}

func (p *pb) uint(n protowire.Number, v uint64) {
	p.b = protowire.AppendVarint(protowire.AppendTag(p.b, n, protowire.VarintType), v)
}

// int writes an int32 or int64 field (two's complement, as protobuf does).
func (p *pb) int(n protowire.Number, v int64) { p.uint(n, uint64(v)) }

func (p *pb) fixed64(n protowire.Number, v uint64) {
	p.b = protowire.AppendFixed64(protowire.AppendTag(p.b, n, protowire.Fixed64Type), v)
}

func (p *pb) str(n protowire.Number, s string) {
	p.b = protowire.AppendString(protowire.AppendTag(p.b, n, protowire.BytesType), s)
}

// internTable is one interning index of the sequence: a name's iid (from 1,
// in the order first used), and the names given an iid since the last
// packet was written, which that packet's InternedData carries.
type internTable struct {
	iids  map[string]uint64
	fresh []string
}

func (in *internTable) iid(name string) uint64 {
	if id, ok := in.iids[name]; ok {
		return id
	}
	if in.iids == nil {
		in.iids = map[string]uint64{}
	}
	id := uint64(len(in.iids) + 1)
	in.iids[name] = id
	in.fresh = append(in.fresh, name)
	return id
}

// write adds the fresh names to the InternedData being made, as field n.
func (in *internTable) write(p *pb, n protowire.Number) {
	for _, name := range in.fresh {
		p.begin(n)
		p.uint(pfInternedIID, in.iids[name])
		p.str(pfInternedName, name)
		p.end()
	}
	in.fresh = in.fresh[:0]
}

// bundle is a CPU's cpu_idle events not yet written, each an encoded
// FtraceEventBundle.event field.
type bundle struct {
	events []byte
	n      int
}

// perfettoWriter writes one trace's Perfetto trace.
type perfettoWriter struct {
	eventWriter
	wakeRequests bool

	p, ev pb // the packet being made, an ftrace event
	// The interning indexes of TrackEvent names and annotation names.
	eventNames, annotationNames internTable
	bundles                     []bundle // per CPU
	// wakeTracks: per CPU, its wake-ups track is described.
	wakeTracks  []bool
	requests    bool                // the wake requests track is described
	lanes       map[uint32][]uint64 // per CPU, the instant each IO lane is busy until
	slotLane    []uint64            // per IO slot of the timeline: its slice's track
	slotFlow    []uint64            // and its flow
	flow        uint64              // the last flow id given
	devNames    map[uint32]string
	opNames     [256]string
	maxInFlight int
	qos         []trace.PMQoSChange // the PM QoS changes, written at the end
}

// WritePerfetto writes the Perfetto trace of r's records that o selects
// to w (see the top of this file). Memory holds the events between the
// earliest time a chunk yet to be read may hold and the latest read, as
// for the ftrace text. Summary.Events counts the events written (cpu_idle
// events and TrackEvents), Summary.Flows the wake-request flows.
func WritePerfetto(r *trace.Reader, o Options, w io.Writer) (Summary, error) {
	f := newPerfettoWriter(r, o, w)
	err := f.run()
	return f.sum, err
}

func newPerfettoWriter(r *trace.Reader, o Options, w io.Writer) *perfettoWriter {
	f := &perfettoWriter{
		eventWriter:  newEventWriter(r, o, w),
		wakeRequests: r.Meta.Inputs.WakeCauses && r.Meta.Inputs.WakeRequests,
		lanes:        map[uint32][]uint64{},
		devNames:     map[uint32]string{},
	}
	f.bundles = make([]bundle, f.ncpus)
	f.wakeTracks = make([]bool, f.ncpus)
	for _, d := range r.Meta.BlockDevices {
		f.devNames[d.Dev()] = d.Name
	}
	f.tl = newTimeline(r, f.write)
	return f
}

func (f *perfettoWriter) run() error {
	// The first packet on the sequence: the parent track, which orders
	// its children by rank.
	f.p.reset()
	f.p.begin(pfTracePacket)
	f.p.uint(pfPacketSequenceID, sequenceID)
	f.p.uint(pfPacketSequenceFlags, seqIncrementalStateCleared)
	f.p.begin(pfPacketTrackDescriptor)
	f.p.uint(pfTrackUUID, rootTrack)
	f.p.str(pfTrackName, "idletrace")
	f.p.str(pfTrackDescription, "block IO and wake-ups from an idletrace recording; idle states are the CPUs' cpuidle tracks")
	f.p.uint(pfTrackChildOrdering, childOrderingExplicit)
	if err := f.writePacket(); err != nil {
		return err
	}
	err := f.tl.scan(f.r, trace.Visitor{Idle: f.addIdle, BlockIO: f.addIO, PMQoS: f.addQoS})
	for cpu := range f.bundles {
		if err == nil {
			err = f.flushBundle(uint32(cpu))
		}
	}
	if err == nil {
		err = f.writeQoS()
	}
	if err == nil {
		err = f.out.Flush()
	}
	return err
}

func (f *perfettoWriter) addIdle(p *trace.IdlePeriod) error {
	kept, err := f.holdPeriod(p)
	if !kept {
		return err
	}
	if f.wakeCauses && p.WakeCause != trace.WakeUnknown {
		w := event{ns: p.ExitNs, cpu: p.CPU, kind: evWake, cause: p.WakeCause, irq: p.WakeIRQ, state: p.State}
		if f.wakeRequests && p.WakeCause.IsRemoteWake() && p.WakeRequestNs != 0 && p.WakeRequestNs <= p.ExitNs {
			f.flow++
			w.flow = f.flow
			f.tl.hold(event{ns: p.WakeRequestNs, cpu: p.CPU, kind: evWakeRequest, flow: w.flow})
		}
		f.tl.hold(w)
	}
	return nil
}

func (f *perfettoWriter) addIO(b *trace.BlockIO) error {
	if b.CompleteNs < b.IssueNs || b.IssueCPU >= trace.MaxCPUs || b.CompleteCPU >= trace.MaxCPUs {
		if f.sel.io(b) {
			f.sum.Invalid++ // no slice can show it
		}
		return nil
	}
	return f.holdIO(b)
}

func (f *perfettoWriter) write(e *event) error {
	switch e.kind {
	case evEntry:
		return f.cpuIdle(e.cpu, e.ns, e.state)
	case evExit:
		return f.cpuIdle(e.cpu, e.ns, cpuIdleExit)
	case evWake:
		return f.wakeUp(e)
	case evWakeRequest:
		return f.wakeRequest(e)
	case evIssue:
		return f.issue(e)
	case evComplete:
		return f.complete(e)
	}
	return nil
}

// writePacket closes the packet being made and writes it.
func (f *perfettoWriter) writePacket() error {
	if len(f.eventNames.fresh)+len(f.annotationNames.fresh) > 0 {
		for len(f.p.open) > 1 { // back to the TracePacket
			f.p.end()
		}
		f.p.begin(pfPacketInternedData)
		f.eventNames.write(&f.p, pfInternedEventNames)
		f.annotationNames.write(&f.p, pfInternedAnnotationNames)
	}
	f.p.endAll()
	_, err := f.out.Write(f.p.b)
	f.p.reset()
	return err
}

// cpuIdle adds a cpu_idle event to its CPU's bundle, written when full.
func (f *perfettoWriter) cpuIdle(cpu uint32, ns uint64, state uint32) error {
	ev := &f.ev
	ev.reset()
	ev.begin(pfBundleEvent)
	ev.uint(pfFtraceTimestamp, ns)
	ev.uint(pfFtracePid, 0) // the idle task
	ev.begin(pfFtraceCPUIdle)
	ev.uint(pfCPUIdleState, uint64(state))
	ev.uint(pfCPUIdleCPUID, uint64(cpu))
	ev.endAll()
	b := &f.bundles[cpu]
	b.events = append(b.events, ev.b...)
	b.n++
	f.sum.Events++
	if b.n >= bundleMaxEvents {
		return f.flushBundle(cpu)
	}
	return nil
}

func (f *perfettoWriter) flushBundle(cpu uint32) error {
	b := &f.bundles[cpu]
	if b.n == 0 {
		return nil
	}
	f.p.reset()
	f.p.begin(pfTracePacket)
	f.p.begin(pfPacketFtraceEvents)
	f.p.uint(pfBundleCPU, uint64(cpu))
	f.p.b = append(f.p.b, b.events...)
	b.events, b.n = b.events[:0], 0
	return f.writePacket()
}

// describe writes a track's descriptor, a child of the parent track.
func (f *perfettoWriter) describe(uuid uint64, name, description string, rank int32) error {
	f.beginDescriptor(uuid, name, description, rank)
	return f.writePacket()
}

// beginDescriptor begins a packet with a child track's descriptor; its
// further fields follow, writePacket ends it.
func (f *perfettoWriter) beginDescriptor(uuid uint64, name, description string, rank int32) {
	f.p.reset()
	f.p.begin(pfTracePacket)
	f.p.uint(pfPacketSequenceID, sequenceID)
	f.p.begin(pfPacketTrackDescriptor)
	f.p.uint(pfTrackUUID, uuid)
	f.p.uint(pfTrackParentUUID, rootTrack)
	f.p.str(pfTrackName, name)
	f.p.str(pfTrackDescription, description)
	f.p.int(pfTrackSiblingRank, int64(rank))
}

func (f *perfettoWriter) addQoS(q *trace.PMQoSChange) error {
	f.qos = append(f.qos, *q)
	return nil
}

// writeQoS writes the PM QoS changes in the window as counter tracks, one
// per constraint that changed (the global CPU latency limit, a CPU's
// resume latency), in µs, -1 for none: its value where the window opens,
// then each change. Perfetto's trace processor sorts the file's events,
// so these come last.
func (f *perfettoWriter) writeQoS() error {
	sel := selectQoS(f.meta, &f.sel, f.qos)
	described := map[int32]bool{}
	us := func(cpu int32, v int64) int64 {
		if v, ok := limitUs(cpu, v); ok {
			return v
		}
		return -1
	}
	for _, q := range sel.changes {
		track := qosTrackKind | uint64(q.CPU+1)
		if !described[q.CPU] {
			described[q.CPU] = true
			name, desc := "PM QoS CPU latency limit", "the global CPU latency limit (/dev/cpu_dma_latency) in µs, -1 for none; the governors keep to states whose exit latency is within it"
			if q.CPU >= 0 {
				name, desc = fmt.Sprintf("PM QoS resume latency cpu %d", q.CPU), "this CPU's resume latency constraint in µs, -1 for none (0: only polling)"
			}
			f.beginDescriptor(track, name, desc, q.CPU-trace.MaxCPUs-1) // first, the global limit at the top
			f.p.begin(pfTrackCounter)
			f.p.str(pfCounterUnitName, "µs")
			if err := f.writePacket(); err != nil {
				return err
			}
			if v, known := sel.at(q.CPU); known && sel.openNs < q.TimeNs {
				f.trackEvent(sel.openNs, typeCounter, track, "")
				f.p.int(pfEventCounterValue, us(q.CPU, v))
				if err := f.writePacket(); err != nil {
					return err
				}
			}
		}
		f.trackEvent(q.TimeNs, typeCounter, track, "")
		f.p.int(pfEventCounterValue, us(q.CPU, q.LimitUs))
		if err := f.writePacket(); err != nil {
			return err
		}
	}
	return nil
}

// trackEvent begins a TrackEvent packet; its fields follow, writePacket
// ends it.
func (f *perfettoWriter) trackEvent(ns uint64, typ uint64, track uint64, name string) {
	f.p.reset()
	f.p.begin(pfTracePacket)
	f.p.uint(pfPacketTimestamp, ns)
	f.p.uint(pfPacketSequenceID, sequenceID)
	f.p.uint(pfPacketSequenceFlags, seqNeedsIncrementalState)
	f.p.begin(pfPacketTrackEvent)
	f.p.uint(pfEventType, typ)
	f.p.uint(pfEventTrackUUID, track)
	if name != "" {
		f.p.uint(pfEventNameIID, f.eventNames.iid(name))
	}
	f.sum.Events++
}

// The debug annotations of the TrackEvent being made: a name and a value.

func (f *perfettoWriter) annotate(name string) {
	f.p.begin(pfEventDebugAnnotation)
	f.p.uint(pfAnnotationNameIID, f.annotationNames.iid(name))
}

func (f *perfettoWriter) annUint(name string, v uint64) {
	f.annotate(name)
	f.p.uint(pfAnnotationUint, v)
	f.p.end()
}

func (f *perfettoWriter) annInt(name string, v int64) {
	f.annotate(name)
	f.p.int(pfAnnotationInt, v)
	f.p.end()
}

func (f *perfettoWriter) annString(name, v string) {
	f.annotate(name)
	f.p.str(pfAnnotationString, v)
	f.p.end()
}

// wakeName is the name of a wake-up's instant.
func wakeName(c trace.WakeCause, irq int32) string {
	if c == trace.WakeIRQ && irq >= 0 {
		return "irq " + strconv.Itoa(int(irq))
	}
	return c.String()
}

func (f *perfettoWriter) wakeUp(e *event) error {
	track := wakeTrackKind | uint64(e.cpu)<<24
	if !f.wakeTracks[e.cpu] {
		f.wakeTracks[e.cpu] = true
		if err := f.describe(track, fmt.Sprintf("wake-ups cpu %d", e.cpu), "what ended each idle period, at its exit; a flow comes from the remote wake request that caused it", 1+2*int32(e.cpu)); err != nil {
			return err
		}
	}
	f.trackEvent(e.ns, typeInstant, track, wakeName(e.cause, e.irq))
	f.annString("state", f.rules.StateName(int(e.cpu), int(e.state)))
	if e.flow != 0 {
		f.p.fixed64(pfEventTerminatingFlowIDs, e.flow)
		f.sum.Flows++
	}
	return f.writePacket()
}

func (f *perfettoWriter) wakeRequest(e *event) error {
	if !f.requests {
		f.requests = true
		if err := f.describe(requestTrack, "wake requests", "a remote CPU asked an idle CPU to wake (IPI send, sched_waking, a no-IPI wake of a polling CPU); the trace does not record which CPU asked", 0); err != nil {
			return err
		}
	}
	f.trackEvent(e.ns, typeInstant, requestTrack, fmt.Sprintf("wake cpu %d", e.cpu))
	f.annUint("target_cpu", uint64(e.cpu))
	f.p.fixed64(pfEventFlowIDs, e.flow)
	return f.writePacket()
}

// lane finds cpu an IO track free from the instant from on (a lane busy
// only before it), busy until until from now on, describing a new one
// where none is free.
func (f *perfettoWriter) lane(cpu uint32, from, until uint64) (uint64, error) {
	lanes := f.lanes[cpu]
	for i, busy := range lanes {
		if busy < from {
			lanes[i] = until
			return ioTrackKind | uint64(cpu)<<24 | uint64(i), nil
		}
	}
	i := len(lanes)
	if i >= maxLanes {
		return 0, fmt.Errorf("more than %d IO requests in flight on CPU %d", maxLanes, cpu)
	}
	f.lanes[cpu] = append(lanes, until)
	f.maxInFlight = max(f.maxInFlight, i+1)
	uuid := ioTrackKind | uint64(cpu)<<24 | uint64(i)
	return uuid, f.describe(uuid, fmt.Sprintf("block IO cpu %d", cpu), "block IO requests issued on this CPU (slices, issue to completion) and completed on it (instants); a flow joins the two", 2+2*int32(cpu))
}

func (f *perfettoWriter) opName(op uint8) string {
	if f.opNames[op] == "" {
		f.opNames[op] = trace.OpName(op)
	}
	return f.opNames[op]
}

func (f *perfettoWriter) device(b *trace.BlockIO) string {
	if name, ok := f.devNames[b.Dev]; ok {
		return name
	}
	name := fmt.Sprintf("%d:%d", b.DevMajor(), b.DevMinor())
	f.devNames[b.Dev] = name
	return name
}

func (f *perfettoWriter) issue(e *event) error {
	b := &f.tl.ios[e.io]
	track, err := f.lane(b.IssueCPU, b.IssueNs, b.CompleteNs)
	if err != nil {
		return err
	}
	for int(e.io) >= len(f.slotLane) {
		f.slotLane = append(f.slotLane, 0)
		f.slotFlow = append(f.slotFlow, 0)
	}
	f.flow++
	f.slotLane[e.io], f.slotFlow[e.io] = track, f.flow
	f.trackEvent(e.ns, typeSliceBegin, track, f.opName(b.Op))
	f.annString("device", f.device(b))
	f.annUint("sector", b.Sector)
	f.annUint("bytes", uint64(b.Bytes))
	f.annString("op", f.opName(b.Op))
	f.annUint("complete_cpu", uint64(b.CompleteCPU))
	if b.Tid != 0 {
		f.annUint("tid", uint64(b.Tid))
		f.annString("comm", b.Comm)
	}
	f.p.fixed64(pfEventFlowIDs, f.flow)
	return f.writePacket()
}

func (f *perfettoWriter) complete(e *event) error {
	b := &f.tl.ios[e.io]
	f.trackEvent(e.ns, typeSliceEnd, f.slotLane[e.io], "")
	if err := f.writePacket(); err != nil {
		return err
	}
	track, err := f.lane(b.CompleteCPU, b.CompleteNs, b.CompleteNs)
	if err != nil {
		return err
	}
	f.trackEvent(e.ns, typeInstant, track, f.opName(b.Op)+" complete")
	f.annUint("issue_cpu", uint64(b.IssueCPU))
	f.annUint("latency_ns", b.LatencyNs())
	f.annInt("error", int64(b.Error))
	f.p.fixed64(pfEventTerminatingFlowIDs, f.slotFlow[e.io])
	return f.writePacket()
}
