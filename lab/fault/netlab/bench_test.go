//go:build linux

package netlab

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"
)

// BenchmarkDelayForwarding measures the packets per second the delay
// goroutines sustain: a TCP bulk transfer from a to b with b delayed by 1 ms,
// so that every data segment and every ACK crosses the TUN. TCP paces itself
// to what the path carries, so the figure is a sustained rate, not a burst.
func BenchmarkDelayForwarding(b *testing.B) {
	l := newLab(b, Config{Hosts: []string{"a", "b"}})
	src, dst := l.Hosts[0], l.Hosts[1]
	ln, err := dst.Listen(context.Background(), "tcp", dst.AddrPort(echoPort))
	if err != nil {
		b.Fatalf("listen: %v", err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	if err := l.SetDelay("b", time.Millisecond); err != nil {
		b.Fatalf("SetDelay: %v", err)
	}
	c, err := src.Dial(context.Background(), "tcp", dst.AddrPort(echoPort))
	if err != nil {
		b.Fatalf("dial: %v", err)
	}
	defer c.Close()
	chunk := make([]byte, 1<<20)
	b.SetBytes(int64(len(chunk)))
	before := l.Stats()
	start := time.Now()
	b.ResetTimer()
	for range b.N {
		if _, err := c.Write(chunk); err != nil {
			b.Fatalf("write: %v", err)
		}
	}
	b.StopTimer()
	elapsed := time.Since(start)
	after := l.Stats()
	b.ReportMetric(float64(after.Forwarded-before.Forwarded)/elapsed.Seconds(), "pkts/s")
	b.ReportMetric(float64(after.Dropped-before.Dropped), "dropped")
}

// BenchmarkDelayedConnect reports a TCP connect's median time over the injected
// 2d for several d: how much the user-space delay adds to what was asked.
func BenchmarkDelayedConnect(b *testing.B) {
	l := newLab(b, Config{Hosts: []string{"a", "b"}})
	src, dst := l.Hosts[0], l.Hosts[1]
	echo(b, dst)
	for _, d := range []time.Duration{5 * time.Millisecond, 25 * time.Millisecond, 100 * time.Millisecond} {
		b.Run(fmt.Sprintf("d=%v", d), func(b *testing.B) {
			if err := l.SetDelay("b", d); err != nil {
				b.Fatalf("SetDelay: %v", err)
			}
			var ts []time.Duration
			for range b.N {
				took, err := connectTime(context.Background(), src, dst.AddrPort(echoPort))
				if err != nil {
					b.Fatalf("connect: %v", err)
				}
				ts = append(ts, took)
			}
			// The median: on a shared machine a stall of the scheduler
			// shows as a rare outlier that a mean would spread over all.
			m := median(ts)
			b.ReportMetric(float64(m)/float64(2*d), "median-ratio-to-2d")
			b.ReportMetric(float64(m-2*d)/float64(time.Millisecond), "median-excess-ms")
		})
	}
}
