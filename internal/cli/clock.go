package cli

import "k8s.io/utils/clock"

// wall is the one clock the commands read time from: the time decide
// judges at and status ages the status by (each without --now), and how
// long a check waits for a timer or between two scrapes. This file is the one place the package reads time.
var wall clock.Clock = clock.RealClock{}
