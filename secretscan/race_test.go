//go:build race

package secretscan_test

// raceEnabled: the race detector is on, and sync.Pool drops what it is
// given at random, so allocations are not counted.
const raceEnabled = true
