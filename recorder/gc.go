package recorder

// GCPercent is the GOGC a recording process runs with under a soft memory
// limit (reel record sets both unless $GOGC is set). Go's default, 100,
// collects each time a small live heap doubles: with the recorder's heap of
// a few MiB that is a collection every few hundred exchanges, whose marking
// costs more per exchange than the exchange's own assembly. The memory
// limit still bounds the heap, so a larger factor only spaces collections
// out below it (docs/performance.md, "Proxy sidecar").
const GCPercent = 300

// DefaultMemoryLimit is the soft Go memory limit a recording process runs
// under by default (reel record --memory-limit). Under it the collector is
// paced by the limit, not by GCPercent: it runs each time the heap reaches
// the limit, so every byte the recorder holds for as long as it runs is a
// byte less headroom between collections.
const DefaultMemoryLimit = 100 << 20
