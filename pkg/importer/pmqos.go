package importer

import (
	"fmt"
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

// qosMatchNs: a request and its update_target are one call; the
// recorder's QOS_MATCH_NS.
const qosMatchNs = 200_000

// qosRequestEvents are the request events by name, with their action.
var qosRequestEvents = map[string]uint8{
	"pm_qos_add_request":        trace.PMQoSAdd,
	"pm_qos_update_request":     trace.PMQoSUpdate,
	"pm_qos_remove_request":     trace.PMQoSRemove,
	"dev_pm_qos_add_request":    trace.PMQoSAdd,
	"dev_pm_qos_update_request": trace.PMQoSUpdate,
	"dev_pm_qos_remove_request": trace.PMQoSRemove,
}

// qosTargetEvent gives the constraint's value before and after a request.
const qosTargetEvent = "pm_qos_update_target"

// qosGlobalEvents must all be in a capture for its global limit's changes
// to be complete; qosDeviceEvents add the CPUs' resume latencies.
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
	if !ok {
		return fmt.Errorf("action=%q is none of ADD_REQ, UPDATE_REQ, REMOVE_REQ", name)
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
	req, ok := p.qosPending[ev.pid]
	if !ok || ev.ns < req.ns || ev.ns-req.ns > qosMatchNs || req.action != action {
		return nil // no request of this task just before: a frequency limit
	}
	delete(p.qosPending, ev.pid)
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

// pmQoSMetadata says whether the capture holds the PM QoS changes: all
// of the global limit's events, and the CPUs' resume latencies where the
// device events are in it too.
func (p *pass) pmQoSMetadata(m *trace.Metadata, tool string) {
	m.Inputs.PMQoSTrace = len(p.lacking(qosGlobalEvents)) == 0
	for _, n := range slices.Concat(qosGlobalEvents, qosDeviceEvents) {
		if p.recorded(n) {
			m.Probes["power:"+n] = "imported: " + tool
		} else {
			m.Probes["power:"+n] = "missing: not in the capture"
		}
	}
}
