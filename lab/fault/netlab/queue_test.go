//go:build linux

package netlab

import (
	"net/netip"
	"testing"
	"time"
)

func pkt(src, dst byte, arrival int64, d time.Duration, tag byte) *packet {
	p := &packet{arrival: arrival, delay: d, buf: []byte{tag}}
	copy(p.pair[:], []byte{198, 18, 0, src, 198, 18, 0, dst})
	return p
}

func drain(q *delayQueue) (tags []byte, releases []int64) {
	for q.len() > 0 {
		p := q.pop()
		tags = append(tags, p.buf[0])
		releases = append(releases, p.release)
	}
	return tags, releases
}

func TestQueueReleasesInTimeOrder(t *testing.T) {
	q := newDelayQueue(10)
	ms := int64(time.Millisecond)
	// A slow pair's packet arrives first, a fast pair's later: the fast one
	// overtakes, as two separate links would allow.
	q.push(pkt(2, 3, 0, 100*time.Millisecond, 'a'))
	q.push(pkt(4, 5, 1*ms, 10*time.Millisecond, 'b'))
	q.push(pkt(2, 3, 2*ms, 100*time.Millisecond, 'c'))
	if rel, ok := q.next(); !ok || rel != 11*ms {
		t.Fatalf("next = %d, %v; want %d, true", rel, ok, 11*ms)
	}
	tags, rels := drain(q)
	if string(tags) != "bac" {
		t.Fatalf("order %q, want %q", tags, "bac")
	}
	want := []int64{11 * ms, 100 * ms, 102 * ms}
	for i := range want {
		if rels[i] != want[i] {
			t.Errorf("release %d = %d, want %d", i, rels[i], want[i])
		}
	}
	if _, ok := q.next(); ok {
		t.Fatalf("next on an empty queue reports a packet")
	}
	if len(q.last) != 0 {
		t.Fatalf("per-pair state left after draining: %v", q.last)
	}
}

func TestQueueKeepsPairOrderWhenDelayShrinks(t *testing.T) {
	q := newDelayQueue(10)
	ms := int64(time.Millisecond)
	q.push(pkt(2, 3, 0, 100*time.Millisecond, 'a'))
	// The delay dropped to 10 ms: this packet would be due at 11 ms, before
	// 'a', but must wait for it.
	q.push(pkt(2, 3, 1*ms, 10*time.Millisecond, 'b'))
	// Same release as 'b' after the clamp: arrival order decides.
	q.push(pkt(2, 3, 2*ms, 0, 'c'))
	// The reverse direction is another pair and is not held back.
	q.push(pkt(3, 2, 3*ms, 10*time.Millisecond, 'd'))
	tags, rels := drain(q)
	if string(tags) != "dabc" {
		t.Fatalf("order %q, want %q", tags, "dabc")
	}
	want := []int64{13 * ms, 100 * ms, 100 * ms, 100 * ms}
	for i := range want {
		if rels[i] != want[i] {
			t.Errorf("release %d = %d, want %d", i, rels[i], want[i])
		}
	}
}

func TestQueueBound(t *testing.T) {
	const max = 3
	q := newDelayQueue(max)
	for i := range max - 1 {
		if !q.push(pkt(2, 3, int64(i), time.Millisecond, byte('a'+i))) {
			t.Fatalf("push %d of %d refused below the bound", i+1, max)
		}
	}
	if !q.push(pkt(2, 3, 10, time.Millisecond, 'x')) {
		t.Fatalf("push at the bound (%d) refused", max)
	}
	if q.push(pkt(2, 3, 11, time.Millisecond, 'y')) {
		t.Fatalf("push over the bound (%d) accepted", max+1)
	}
	if q.len() != max {
		t.Fatalf("len = %d, want %d", q.len(), max)
	}
	tags, _ := drain(q)
	if string(tags) != "abx" {
		t.Fatalf("order %q, want %q (the refused packet must not be kept)", tags, "abx")
	}
}

func TestCheckSubnet(t *testing.T) {
	// A /29 holds 8 addresses: network, router, root, broadcast and 4 hosts.
	p := netip.MustParsePrefix("198.18.0.0/29")
	for hosts, ok := range map[int]bool{3: true, 4: true, 5: false} {
		err := checkSubnet(p, hosts)
		if (err == nil) != ok {
			t.Errorf("checkSubnet(%s, %d hosts) = %v, want ok=%v", p, hosts, err, ok)
		}
	}
	for _, bad := range []string{"198.18.0.1/24", "2001:db8::/64"} {
		if err := checkSubnet(netip.MustParsePrefix(bad), 1); err == nil {
			t.Errorf("checkSubnet(%s) accepted", bad)
		}
	}
	if got := lastAddr(p); got != netip.MustParseAddr("198.18.0.6") {
		t.Errorf("lastAddr(%s) = %s, want 198.18.0.6", p, got)
	}
	if got := nextPrefix(netip.MustParsePrefix("198.18.255.0/24")); got != netip.MustParsePrefix("198.19.0.0/24") {
		t.Errorf("nextPrefix = %s, want 198.19.0.0/24", got)
	}
}
