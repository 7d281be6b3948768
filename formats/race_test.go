//go:build race

package formats

// raceEnabled is true under the race detector, whose pointer checks
// (checkptr) turn some panics inside parquet-go into fatal errors.
const raceEnabled = true
