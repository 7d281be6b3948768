package analysis

// GCPercent is the GOGC an analysis process runs with (reel stats and reel
// report set it unless $GOGC is set). An Analyzer's live heap is flat in
// the run's length, but at Go's default of 100 the heap of a long run
// peaks at twice it, against a short run that ends before its heap has
// doubled: 50 keeps a 10M-exchange run's peak within 1.2× of a 100k one's
// for a few per cent more CPU (docs/performance.md, #22).
const GCPercent = 50

// Procs is the GOMAXPROCS an analysis process runs with (reel stats and
// reel report set it unless $GOMAXPROCS is set). The analysis runs on one
// goroutine: given more Ps, the runtime fills the idle ones with idle-time
// mark workers and spinning threads, CPU that buys no wall time. Over 10M
// exchanges on two cores that was 8.9 s of CPU against 6.9 s on one, in the
// same 7 s (docs/performance.md, #22).
const Procs = 1
