package wakeup

import "k8s.io/utils/clock"

// wall is the real clock, the one a timer's lateness is a reading of: the
// Meter's own clock (its now and sleep, which tests replace) defaults to
// it, and this file is the one place the package reads time.
var wall clock.Clock = clock.RealClock{}
