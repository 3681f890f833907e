package record

// TracepointID is tracepointID, for the external tests' own perf counters.
var TracepointID = tracepointID

// ReadPerfCount is readPerfCount, for the same.
var ReadPerfCount = readPerfCount
