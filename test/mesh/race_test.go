//go:build race

package mesh

// raceEnabled: this test binary was built with -race, so fleet-role's own
// processes are too, and a data race in them fails the scenario (a race
// makes the process exit 66, which stopComponents reports).
const raceEnabled = true
