//go:build race

package httpserve

// raceEnabled: the race detector's shadow memory inflates a process's RSS
// several times over, so RSS is asserted only without it.
const raceEnabled = true
