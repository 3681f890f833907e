package analysis
import ("testing";"os";"github.com/idletrace/idletrace/pkg/trace")
func TestDbg(t *testing.T){
	meta := driverMeta()
	meta.Start.CPUIdle = []trace.CPUCounters{counters(0, trace.StateCounters{Index: 0}, trace.StateCounters{Index: 1}, trace.StateCounters{Index: 2}), counters(1)}
	meta.Start.Block = []trace.BlockCounter{{Name: "vda", Major: 253, Minor: 0, Stat: []uint64{100, 0, 0, 0, 50, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7}}}
	end := endWith([]trace.CPUCounters{counters(0,
		trace.StateCounters{Index: 0, Usage: 1, TimeUs: 5, Below: 1},
		trace.StateCounters{Index: 1, Usage: 4, TimeUs: 601, Above: 1, Below: 1},
		trace.StateCounters{Index: 2, Usage: 2, TimeUs: 1310, Above: 0}), counters(1)})
	end.Snapshot.Block = []trace.BlockCounter{{Name: "vda", Major: 253, Minor: 0, Stat: []uint64{102, 9, 0, 0, 51, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 8}}}
	ps := syntheticPeriods()
	ps[2].WakeCause, ps[2].WakeRequestNs = trace.WakeIPIResched, ps[2].ExitNs-12345
	ps[3].WakeCause, ps[3].WakeIRQ = trace.WakeIRQ, 24
	ios := []trace.BlockIO{completion(0, ps[3].ExitNs+1000)}
	s, _ := ComputeStats(meta, end, nil, scanOf(ps, ios))
	RenderStats(os.Stdout, s, os.Getenv("F"))
	s, _ = ComputeStats(noDriverMeta(), &trace.End{Snapshot: &trace.Snapshot{MonotonicNs: 10_000_000}}, nil, scanOf([]trace.IdlePeriod{period(0, 1, 10_000, 3*us), period(1,1,5000,4000)}, nil))
	RenderStats(os.Stdout, s, os.Getenv("F"))
}
