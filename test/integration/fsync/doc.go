// Package fsync holds internal/fsync's native reading to fio's on this
// machine's disk (a timing-judging test, run alone by hack/timed-tests.sh),
// and reads a tmpfs it mounts (root).
package fsync
