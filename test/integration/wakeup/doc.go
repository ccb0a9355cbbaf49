// Package wakeup reads internal/wakeup's wake-up lateness in a process
// starved by a CPU quota (root; a timing-judging test, run alone by
// hack/timed-tests.sh).
package wakeup
