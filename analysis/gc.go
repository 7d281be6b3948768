package analysis

// GCPercent is the GOGC an analysis process runs with (reel stats and reel
// report set it unless $GOGC is set). An Analyzer's live heap is flat in
// the run's length, but at Go's default of 100 the heap of a long run
// peaks at twice it, against a short run that ends before its heap has
// doubled: 50 keeps a 10M-exchange run's peak within 1.2× of a 100k one's
// for a few per cent more CPU (docs/performance.md, #22).
const GCPercent = 50

// Procs caps the GOMAXPROCS an analysis process runs with (reel stats and
// reel report cap it unless $GOMAXPROCS is set). With a second P the
// analysis keeps it busy (AddDataset adds the metrics beside the reading
// and the timeline, the reader decodes ahead, stats groups sessions
// beside both): on two cores that takes about two thirds of one P's wall
// time for about 6 % more CPU and a few MB more peak memory
// (docs/performance.md, #22 session 9). GOMAXPROCS=1 is the cheaper in
// CPU.
const Procs = 2
