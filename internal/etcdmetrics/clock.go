package etcdmetrics

import "k8s.io/utils/clock"

// wall is the clock this package reads time from: the real one, whose
// readings carry the monotonic clock. A latency is a reading of real time
// that no component's injected clock can stand in for (a fake one would
// read every wait as taking nothing), so the components' clocks stop at
// this package's door, and this file is the one place it reads time.
var wall clock.PassiveClock = clock.RealClock{}
