// Package leftover names what a lab run makes on the machine (a FUSE mount,
// a cgroup) after the process that makes it, PREFIX-PID-SEQ, so that a later
// run can tell what a crashed run left behind from what a live concurrent
// run still uses, and sweep only the former. lab/fault/netlab names its network
// namespaces the same way.
package leftover

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// seq numbers the names of this process, whatever their prefix.
var seq atomic.Uint64

// live holds the names of this process that are still in use.
var live sync.Map

// Name returns a new name PREFIX-PID-SEQ, held in use until Release.
func Name(prefix string) string {
	n := fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), seq.Add(1))
	live.Store(n, true)
	return n
}

// Release marks a name no longer in use: a sweep may take what bears it.
func Release(name string) { live.Delete(name) }

// PID is the process a name PREFIX-PID-SEQ names, 0 when name is not so
// made with this prefix.
func PID(name, prefix string) int {
	rest, ok := strings.CutPrefix(name, prefix+"-")
	if !ok {
		return 0
	}
	f := strings.Split(rest, "-")
	if len(f) != 2 {
		return 0
	}
	if _, err := strconv.ParseUint(f[1], 10, 64); err != nil {
		return 0
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// Stale reports whether name was made with this prefix by a run that is
// gone: its process no longer runs, or it is this process and the name was
// released (or made before a restart of this package's state, which cannot
// happen within one process). Anything else is not the caller's to remove.
func Stale(name, prefix string) bool {
	pid := PID(name, prefix)
	switch {
	case pid == 0:
		return false
	case pid == os.Getpid():
		_, inUse := live.Load(name)
		return !inUse
	default:
		return !processExists(pid)
	}
}

func processExists(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
