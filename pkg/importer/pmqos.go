package importer

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/idletrace/idletrace/pkg/trace"
)

// PM QoS changes from a capture's power events, paired as the recorder
// pairs them in BPF (bpf/idletrace.bpf.c): a request event names the
// constraint (pm_qos_*_request: the global CPU latency limit;
// dev_pm_qos_*_request: a device's, of which a CPU's resume latency is
// kept), and the pm_qos_update_target the same task reaches next, with
// the same action and within qosMatchNs, gives the constraint's value
// before and after. pm_qos_update_target alone cannot tell a latency
// limit from a frequency limit, which goes through it too.

// qosMatchNs: a request and its update_target are one call, which a
// host may hold for milliseconds; the recorder's QOS_MATCH_NS.
const qosMatchNs = 20_000_000

// qosRequestEvents are the request events by name, with their action.
var qosRequestEvents = map[string]uint8{
	"pm_qos_add_request":        trace.PMQoSAdd,
	"pm_qos_update_request":     trace.PMQoSUpdate,
	"pm_qos_remove_request":     trace.PMQoSRemove,
	"dev_pm_qos_add_request":    trace.PMQoSAdd,
	"dev_pm_qos_update_request": trace.PMQoSUpdate,
	"dev_pm_qos_remove_request": trace.PMQoSRemove,
}

// qosRequestNames lists qosRequestEvents' names.
func qosRequestNames() []string { return slices.Collect(maps.Keys(qosRequestEvents)) }

// qosTargetEvent gives the constraint's value before and after a request.
const qosTargetEvent = "pm_qos_update_target"

// qosGlobalEvents are the global limit's events, qosDeviceEvents those
// that add the CPUs' resume latencies: the probes say which a capture has.
var (
	qosGlobalEvents = []string{qosTargetEvent, "pm_qos_add_request", "pm_qos_update_request", "pm_qos_remove_request"}
	qosDeviceEvents = []string{"dev_pm_qos_add_request", "dev_pm_qos_update_request", "dev_pm_qos_remove_request"}
)

// qosActions are pm_qos_update_target's actions (enum pm_qos_req_action)
// by name, as tracefs prints them, and by number, as perf script does
// (its libtraceevent cannot resolve the enum: "action=0x0").
var qosActions = map[string]uint8{"ADD_REQ": trace.PMQoSAdd, "UPDATE_REQ": trace.PMQoSUpdate, "REMOVE_REQ": trace.PMQoSRemove,
	"0x0": trace.PMQoSAdd, "0x1": trace.PMQoSUpdate, "0x2": trace.PMQoSRemove}

// qosResumeLatency is DEV_PM_QOS_RESUME_LATENCY by name and by number
// (enum dev_pm_qos_req_type).
var qosResumeLatency = map[string]bool{"DEV_PM_QOS_RESUME_LATENCY": true, "0x1": true}

// qosRequest is a task's request waiting for its update_target.
type qosRequest struct {
	ns     uint64
	target int32 // trace.PMQoSGlobal or a CPU
	action uint8
	ignore bool // another device's constraint, or not a resume latency
}

// qosRequestEvent notes a request event of ev's task.
func (p *pass) qosRequestEvent(ev *event, action uint8) error {
	req := qosRequest{ns: ev.ns, target: trace.PMQoSGlobal, action: action}
	// Before 5.7 the events served every PM QoS class
	// ("pm_qos_class=%s value=%d"): only CPU_DMA_LATENCY (1) is ours.
	if class, ok := field(ev.fields, "pm_qos_class"); ok && class != "CPU_DMA_LATENCY" && class != "0x1" {
		req.ignore = true
	}
	if strings.HasPrefix(ev.name, "dev_") {
		dev, ok := field(ev.fields, "device")
		if !ok {
			return fmt.Errorf("no device= field")
		}
		typ, _ := field(ev.fields, "type")
		cpu, err := strconv.ParseUint(strings.TrimPrefix(dev, "cpu"), 10, 32)
		if !strings.HasPrefix(dev, "cpu") || err != nil || cpu >= trace.MaxCPUs || !qosResumeLatency[typ] {
			req.ignore = true
		} else {
			req.target = int32(cpu)
		}
	}
	if p.qosPending == nil {
		p.qosPending = map[int64]qosRequest{}
	}
	p.qosPending[ev.pid] = req
	return nil
}

// qosUpdateTarget pairs pm_qos_update_target with its task's request and
// writes the change it made (second pass).
func (p *pass) qosUpdateTarget(ev *event) error {
	name, ok := field(ev.fields, "action")
	if !ok {
		return fmt.Errorf("no action= field")
	}
	action, ok := qosActions[name]
	if !ok { // a kernel's action this one does not know: no latency change of ours
		p.sum.Skipped[ev.name+" (action="+name+")"]++
		delete(p.qosPending, ev.pid)
		return nil
	}
	var vals [2]int64
	for i, key := range []string{"prev_value", "curr_value"} {
		v, ok := field(ev.fields, key)
		if !ok {
			return fmt.Errorf("no %s= field", key)
		}
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return fmt.Errorf("%s=%q is not a 32-bit number", key, v)
		}
		vals[i] = n
	}
	// As in BPF, a task's request is consumed by its next update_target,
	// matched or not.
	req, ok := p.qosPending[ev.pid]
	delete(p.qosPending, ev.pid)
	if !ok || ev.ns < req.ns || ev.ns-req.ns > qosMatchNs || req.action != action {
		return nil // no request of this task just before: a frequency limit
	}
	if req.ignore || vals[0] == vals[1] {
		return nil
	}
	p.sum.PMQoSChanges++
	if p.w == nil {
		return nil
	}
	c := trace.PMQoSChange{TimeNs: ev.ns, CPU: req.target, Action: action,
		PrevUs: trace.PMQoSFromKernel(req.target, vals[0]), LimitUs: trace.PMQoSFromKernel(req.target, vals[1])}
	if ev.pid > 0 && ev.pid <= 1<<32-1 {
		c.Tid = uint32(ev.pid)
	}
	return p.w.AddPMQoS(&c)
}

// pmQoSMetadata says whether the capture holds the PM QoS changes:
// pm_qos_update_target and at least one request event (the probes say
// which are missing: a change whose request event the capture lacks is
// not seen); and gives the limits where it begins, where idletrace's
// export header says.
func (p *pass) pmQoSMetadata(m *trace.Metadata, tool string) {
	if p.qosStartGlobal != nil {
		m.PMQoS.CPUDMALatencyUs = *p.qosStartGlobal
	}
	if len(p.qosStartCPUs) > 0 {
		m.PMQoS.ResumeLatencyUs = make([]int64, m.NumCPUs)
		for c := range m.PMQoS.ResumeLatencyUs {
			v, ok := p.qosStartCPUs[c]
			if !ok {
				v = -1 // not given: none
			}
			m.PMQoS.ResumeLatencyUs[c] = v
		}
	}
	m.Inputs.PMQoSTrace = p.recorded(qosTargetEvent) && len(p.lacking(qosRequestNames())) < len(qosRequestEvents)
	for _, n := range slices.Concat(qosGlobalEvents, qosDeviceEvents) {
		if p.recorded(n) {
			m.Probes["power:"+n] = "imported: " + tool
		} else {
			m.Probes["power:"+n] = "missing: not in the capture"
		}
	}
}

// headerQoS reads idletrace's ftrace export's comment line with the
// limits in force where the capture begins (trace.ExportQoSHeader).
func (p *pass) headerQoS(t string) {
	rest, ok := strings.CutPrefix(t, trace.ExportQoSHeader)
	if !ok {
		return
	}
	for _, f := range strings.Fields(rest) {
		key, val, ok := strings.Cut(f, "=")
		v, err := strconv.ParseInt(val, 10, 64)
		if !ok || err != nil {
			continue
		}
		if key == "cpu_dma_latency" {
			p.qosStartGlobal = &v
			continue
		}
		if c, err := strconv.ParseUint(strings.TrimPrefix(key, "cpu"), 10, 32); err == nil && strings.HasPrefix(key, "cpu") && c < trace.MaxCPUs {
			if p.qosStartCPUs == nil {
				p.qosStartCPUs = map[int]int64{}
			}
			p.qosStartCPUs[int(c)] = v
		}
	}
}
