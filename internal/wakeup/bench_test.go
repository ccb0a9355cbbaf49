package wakeup

import (
	"context"
	"syscall"
	"testing"
	"time"
)

// BenchmarkLoopCPU measures what the reading costs: the process's CPU time
// (user and system, getrusage) per wake-up of the real loop, with its timer
// set for 1 ms so that b.N wake-ups come quickly. Each wake-up costs the
// same whatever its interval, so the probe's cost is this once a heartbeat
// interval; "core-%-at-500ms" is that share of one core at k3s's heartbeat
// of 500 ms. It counts the whole process, the benchmark's own polling
// (every 10 ms) too: an upper bound.
func BenchmarkLoopCPU(b *testing.B) {
	m := New(time.Millisecond)
	before := cpuTime(b)
	m.Start(context.Background())
	for {
		time.Sleep(10 * time.Millisecond)
		m.t.mu.Lock()
		n := m.t.total
		m.t.mu.Unlock()
		if n >= uint64(b.N) {
			break
		}
	}
	m.Stop()
	spent := cpuTime(b) - before
	m.t.mu.Lock()
	wakes := m.t.total
	m.t.mu.Unlock()
	perWake := float64(spent) / float64(wakes)
	b.ReportMetric(perWake, "cpu-ns/wake")
	b.ReportMetric(100*perWake/float64(500*time.Millisecond), "core-%-at-500ms")
	b.ReportMetric(0, "ns/op") // the wall time per op is the timer's interval, not a cost
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkTake is the sampler's side: one Take, as each sample makes.
func BenchmarkTake(b *testing.B) {
	var tr tracker
	now := epoch
	b.ReportAllocs()
	for b.Loop() {
		tr.armed(now)
		now = now.Add(time.Millisecond)
		tr.woke(now)
		tr.take()
	}
}
