//go:build !race

package secretscan_test

const raceEnabled = false
