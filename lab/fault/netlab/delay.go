//go:build linux

package netlab

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// tunName is the TUN device in the router namespace.
	tunName = "dly"
	// delayTable is the router's routing table that holds only "default dev
	// dly"; any number but main (254), local (255) and default (253) would do.
	delayTable = 100
	// tunRulePriority sends what comes back out of the TUN by the main table.
	// It must come before delayRulePriority, or a packet to a delayed host
	// would go round the TUN for ever.
	tunRulePriority = 100
	// delayRulePriority is that of the rules that divert a delayed host's
	// traffic into the TUN; after the local table's rule (0), so that the
	// router's own address and ARP are never delayed.
	delayRulePriority = 1000
)

// DefaultMaxQueued is how many packets the delay holds at once before it
// drops: room for four TCP flows each with a full window of Linux's largest
// default receive buffer (net.ipv4.tcp_rmem max 6 MiB = 4096 packets of
// 1500 bytes) in flight; at most 24 MiB of memory.
const DefaultMaxQueued = 4 * 4096

// maxPacket is the largest IPv4 packet; the TUN hands over one packet per
// read, and a read into a shorter buffer would truncate it.
const maxPacket = 65535

// Stats counts what the delay goroutine did.
type Stats struct {
	Forwarded uint64 // packets held and written back
	Dropped   uint64 // packets dropped: queue full, not IPv4, or not written back
	Lost      uint64 // packets dropped on purpose by a host's loss rate (SetLoss)
	Cut       uint64 // packets discarded on a cut link (CutLink)
	Queued    int    // packets held right now
}

// impairments is what the delay goroutine does to the packets the router
// diverts to it. It is replaced whole on every change, so the reader never
// locks; a packet with no entry in any map is written back at once.
type impairments struct {
	delay map[[4]byte]time.Duration // a host's delay, in each direction
	loss  map[[4]byte]float64       // a host's loss rate, in each direction
	link  map[[8]byte]linkRule      // a pair of hosts, by pairKey
}

// linkRule is what happens to the packets between two given hosts, in both
// directions, on top of what each host's own delay and loss do.
type linkRule struct {
	delay time.Duration
	cut   bool
}

// pairKey is the key of the link between a and b, whichever sends: the lower
// address first.
func pairKey(a, b [4]byte) [8]byte {
	if string(b[:]) < string(a[:]) {
		a, b = b, a
	}
	var k [8]byte
	copy(k[:4], a[:])
	copy(k[4:], b[:])
	return k
}

// judge returns what becomes of a packet from src to dst: dropped on a cut
// link, lost at the rate of its ends (each end's loss independent, so the
// packet survives with (1-ls)(1-ld)), or held for the delays of both ends
// and of their link.
func (im *impairments) judge(src, dst [4]byte) (hold time.Duration, cut, lost bool) {
	lr := im.link[pairKey(src, dst)]
	if lr.cut {
		return 0, true, false
	}
	if ls, ld := im.loss[src], im.loss[dst]; ls > 0 || ld > 0 {
		if rand.Float64() >= (1-ls)*(1-ld) {
			return 0, false, true
		}
	}
	return im.delay[src] + im.delay[dst] + lr.delay, false, false
}

// packet is one IPv4 packet held for delay.
type packet struct {
	buf     []byte
	pair    [8]byte       // source and destination address: the order is kept per pair
	arrival int64         // when the TUN handed it over, in ns on the delayer's clock
	delay   time.Duration // its hold: the delays of its source, its destination and their link summed
	release int64         // when to write it back, set by delayQueue.push
	seq     uint64        // arrival order, which breaks ties in release
}

// delayQueue releases packets in order of release time, and never lets a
// packet of a source/destination pair overtake an earlier one of the same
// pair when the delay shrinks (TCP would take that for loss). Not safe for
// concurrent use: one goroutine owns it.
type delayQueue struct {
	max  int
	h    packetHeap
	last map[[8]byte]int64 // latest release time queued, per pair
	seq  uint64
}

func newDelayQueue(max int) *delayQueue {
	return &delayQueue{max: max, last: map[[8]byte]int64{}}
}

// push queues p to be released at its arrival plus its delay, or later if an
// earlier packet of its pair is released later. It reports false, keeping
// nothing, when the queue already holds its maximum.
func (q *delayQueue) push(p *packet) bool {
	if len(q.h) >= q.max {
		return false
	}
	p.release = p.arrival + int64(p.delay)
	if l, ok := q.last[p.pair]; ok && l > p.release {
		p.release = l
	}
	q.last[p.pair] = p.release
	q.seq++
	p.seq = q.seq
	heap.Push(&q.h, p)
	return true
}

// next returns the earliest release time; ok is false when empty.
func (q *delayQueue) next() (release int64, ok bool) {
	if len(q.h) == 0 {
		return 0, false
	}
	return q.h[0].release, true
}

// pop removes and returns the earliest packet.
func (q *delayQueue) pop() *packet {
	p := heap.Pop(&q.h).(*packet)
	// Any later packet of the pair is released at or after now, which is at
	// or after this one's release, so the pair's entry is no longer needed
	// once its latest packet has gone.
	if q.last[p.pair] == p.release {
		delete(q.last, p.pair)
	}
	return p
}

func (q *delayQueue) len() int { return len(q.h) }

type packetHeap []*packet

func (h packetHeap) Len() int { return len(h) }
func (h packetHeap) Less(i, j int) bool {
	if h[i].release != h[j].release {
		return h[i].release < h[j].release
	}
	return h[i].seq < h[j].seq
}
func (h packetHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *packetHeap) Push(x any)   { *h = append(*h, x.(*packet)) }
func (h *packetHeap) Pop() any {
	old := *h
	p := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return p
}

// delayer serves the TUN device: a reader goroutine stamps each packet with
// its arrival time and delay, a scheduler goroutine holds it and writes it
// back when due.
type delayer struct {
	tun *os.File
	// tick is a timerfd: its expiry wakes the runtime's poller at once, where
	// a Go timer can fire up to a millisecond late (the poller's epoll wait
	// counts in milliseconds), which a connect would show as 1 ms of excess
	// per delayed crossing.
	tick    *os.File
	tickFD  int
	due     chan struct{}
	in      chan *packet
	stop    chan struct{}
	schedWG sync.WaitGroup // the scheduler, the only user of tickFD
	wg      sync.WaitGroup // the reader and the waker
	epoch   time.Time
	q       *delayQueue
	// rules is replaced whole on every change, so the reader never locks.
	rules atomic.Pointer[impairments]

	forwarded, dropped, lost, cut atomic.Uint64
	queued                        atomic.Int64
	closeOnce                     sync.Once
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// startDelayer makes the TUN device in the router namespace, the routing that
// serves it, and starts its goroutines.
func startDelayer(ctx context.Context, router string, maxQueued int) (*delayer, error) {
	var tun *os.File
	// The device is made in the namespace of the thread that opens
	// /dev/net/tun (the open file's socket belongs to it), not of the one that
	// calls TUNSETIFF; reads and writes later work from any thread.
	err := doIn(nsPath(router), func() error {
		fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open /dev/net/tun: %w", err)
		}
		ifr, err := unix.NewIfreq(tunName)
		if err != nil {
			unix.Close(fd)
			return err
		}
		// IFF_NO_PI: bare IP packets, no 4-byte header. No IFF_VNET_HDR and
		// no TUNSETOFFLOAD: the kernel then completes checksums and splits
		// the veths' TSO/GSO super-packets before handing them over, so
		// every read is one finished packet of at most the MTU.
		ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
		if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
			unix.Close(fd)
			return fmt.Errorf("TUNSETIFF %s: %w", tunName, err)
		}
		// Non-blocking, so os.File uses the runtime poller and Close
		// unblocks a pending Read.
		tun = os.NewFile(uintptr(fd), "/dev/net/tun")
		// The TUN has no link-layer address, but would still get IPv6
		// link-local chatter (and the reader drops non-IPv4 anyway).
		return writeSysctls(map[string]string{
			"net/ipv6/conf/" + tunName + "/disable_ipv6": "1",
			"net/ipv4/conf/" + tunName + "/rp_filter":    "0",
		})
	})
	if err != nil {
		if tun != nil {
			tun.Close()
		}
		return nil, fmt.Errorf("netlab: tun in %s: %w", router, err)
	}
	table := strconv.Itoa(delayTable)
	if err := ipAll(ctx,
		[]string{"-n", router, "link", "set", tunName, "up"},
		[]string{"-n", router, "route", "add", "default", "dev", tunName, "table", table},
		[]string{"-n", router, "rule", "add", "iif", tunName, "lookup", "main", "priority", strconv.Itoa(tunRulePriority)},
	); err != nil {
		tun.Close()
		return nil, err
	}
	tfd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		tun.Close()
		return nil, fmt.Errorf("netlab: timerfd: %w", err)
	}
	d := &delayer{
		tun:    tun,
		tick:   os.NewFile(uintptr(tfd), "timerfd"),
		tickFD: tfd,
		due:    make(chan struct{}, 1),
		in:     make(chan *packet, 256),
		stop:   make(chan struct{}),
		epoch:  time.Now(),
		q:      newDelayQueue(maxQueued),
	}
	d.setRules(&impairments{})
	d.wg.Add(2)
	d.schedWG.Add(1)
	go d.read()
	go d.wake()
	go d.schedule()
	return d, nil
}

func (d *delayer) setRules(im *impairments) { d.rules.Store(im) }

// now is the delayer's clock: monotonic ns since it started.
func (d *delayer) now() int64 { return int64(time.Since(d.epoch)) }

func (d *delayer) read() {
	defer d.wg.Done()
	buf := make([]byte, maxPacket)
	for {
		n, err := d.tun.Read(buf)
		if err != nil {
			if errors.Is(err, os.ErrClosed) {
				return
			}
			// Not expected from a TUN; pause rather than spin if it repeats.
			d.dropped.Add(1)
			time.Sleep(time.Millisecond)
			continue
		}
		now := d.now()
		b := buf[:n]
		if n < 20 || b[0]>>4 != 4 {
			d.dropped.Add(1)
			continue
		}
		hold, cut, lost := d.rules.Load().judge([4]byte(b[12:16]), [4]byte(b[16:20]))
		switch {
		case cut:
			d.cut.Add(1)
			continue
		case lost:
			d.lost.Add(1)
			continue
		}
		p := &packet{arrival: now, delay: hold}
		copy(p.pair[:], b[12:20])
		pb := bufPool.Get().(*[]byte)
		p.buf = append((*pb)[:0], b...)
		select {
		case d.in <- p:
		case <-d.stop:
			return
		}
	}
}

// wake turns each expiry of the timerfd into a send on due.
func (d *delayer) wake() {
	defer d.wg.Done()
	var b [8]byte
	for {
		if _, err := d.tick.Read(b[:]); err != nil {
			if errors.Is(err, os.ErrClosed) {
				return
			}
			continue
		}
		select {
		case d.due <- struct{}{}:
		default: // one wake-up pending is enough
		}
	}
}

func (d *delayer) schedule() {
	defer d.schedWG.Done()
	for {
		now := d.now()
		for {
			rel, ok := d.q.next()
			if !ok || rel > now {
				break
			}
			d.write(d.q.pop())
		}
		d.queued.Store(int64(d.q.len()))
		if rel, ok := d.q.next(); ok {
			// rel > now here, so the relative time is at least 1 ns (0
			// would disarm).
			it := unix.ItimerSpec{Value: unix.NsecToTimespec(rel - now)}
			if err := unix.TimerfdSettime(d.tickFD, 0, &it, nil); err != nil {
				// Not expected; fall back on a coarse Go timer.
				time.AfterFunc(time.Duration(rel-now), func() {
					select {
					case d.due <- struct{}{}:
					default:
					}
				})
			}
		}
		select {
		case p := <-d.in:
			d.push(p)
			// Take whatever else has arrived before looking at the clock
			// again: one timer setting per burst rather than per packet.
			for more := true; more; {
				select {
				case p := <-d.in:
					d.push(p)
				default:
					more = false
				}
			}
		case <-d.due:
		case <-d.stop:
			return
		}
	}
}

func (d *delayer) push(p *packet) {
	if !d.q.push(p) {
		d.dropped.Add(1)
		d.free(p)
	}
}

func (d *delayer) write(p *packet) {
	if _, err := d.tun.Write(p.buf); err != nil {
		d.dropped.Add(1)
	} else {
		d.forwarded.Add(1)
	}
	d.free(p)
}

func (d *delayer) free(p *packet) {
	if cap(p.buf) <= 2048 {
		b := p.buf[:0]
		bufPool.Put(&b)
	}
	p.buf = nil
}

func (d *delayer) stats() Stats {
	return Stats{
		Forwarded: d.forwarded.Load(),
		Dropped:   d.dropped.Load(),
		Lost:      d.lost.Load(),
		Cut:       d.cut.Load(),
		Queued:    int(d.queued.Load()),
	}
}

// close stops the goroutines and closes the TUN, which also removes the
// device. Packets still held are dropped, as a powered-off router would.
func (d *delayer) close() {
	d.closeOnce.Do(func() {
		close(d.stop)
		// The scheduler first: it arms the timerfd by number, which must
		// not be closed (and its number reused) under it.
		d.schedWG.Wait()
		d.tun.Close()
		d.tick.Close()
		d.wg.Wait()
	})
}
