package trace

// The limits every reader of a trace shares (stats, the replay, the
// IO-wake matcher, the file format's own per-CPU state): a record beyond
// them comes from a corrupt or hostile file, not from a kernel, and is
// ignored or refused rather than let grow a table.
const (
	// MaxCPUs bounds CPU numbers (the kernel's NR_CPUS is at most 8192
	// on x86-64 and 16384 on arm64 and ppc64 configurations in use).
	MaxCPUs = 1 << 16
	// MaxStates is the cpuidle core's CPUIDLE_STATE_MAX: no driver
	// registers more states, so no cpu_idle record names a higher index.
	MaxStates = 10
)
