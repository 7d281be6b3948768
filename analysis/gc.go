package analysis

// GCPercent is the GOGC an analysis process runs with (reel stats and reel
// report set it unless $GOGC is set). An Analyzer's live heap is flat in
// the run's length, but at Go's default of 100 the heap of a long run
// peaks at twice it, against a short run that ends before its heap has
// doubled: 50 keeps a 10M-exchange run's peak within 1.2× of a 100k one's
// for a few per cent more CPU (docs/performance.md, #22).
const GCPercent = 50

// Procs caps the GOMAXPROCS an analysis process runs with (reel stats and
// reel report cap it unless $GOMAXPROCS is set): the analysis keeps two
// goroutines busy, the metrics and the timeline (AddDataset), with the
// reader's decoding and stats' sessions pass beside them. Given more Ps,
// the runtime fills the idle ones with idle-time mark workers and spinning
// threads, CPU that buys no wall time (docs/performance.md, #22).
const Procs = 2
