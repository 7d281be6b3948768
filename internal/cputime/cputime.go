// Package cputime reads the CPU time the process has used. Benchmarks on
// shared machines report work per CPU-second next to wall-clock rates:
// unlike wall time it barely moves when other processes load the machine.
package cputime
