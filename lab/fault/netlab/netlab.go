//go:build linux

package netlab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultPrefix names the namespaces of a lab whose Config leaves Prefix empty.
const DefaultPrefix = "netlab"

// DefaultSubnet is the benchmarking range of RFC 2544 (198.18.0.0/15 is
// reserved for it), so a lab's addresses cannot be a real network's.
var DefaultSubnet = netip.MustParsePrefix("198.18.0.0/24")

// benchRange is where a ConnectRoot lab with no Subnet set looks for a /24
// that the root namespace does not route yet, so that several such labs (a
// parallel `go test ./...`) can run at once.
var benchRange = netip.MustParsePrefix("198.18.0.0/15")

// opTimeout bounds the ip commands of Close, SetDelay and the link changes,
// which take no context: they are often called from t.Cleanup after the
// test's context has ended. An ip command takes milliseconds.
const opTimeout = 30 * time.Second

// hostLink is the name of every host's own interface.
const hostLink = "eth0"

// ErrNotRoot is returned by New when the process is not root: namespaces,
// veths and TUN devices need CAP_NET_ADMIN and CAP_SYS_ADMIN.
var ErrNotRoot = errors.New("netlab needs root (network namespaces, veth and TUN devices)")

// Config describes a lab.
type Config struct {
	// Prefix starts the name of every namespace the lab makes; DefaultPrefix
	// when empty. New sweeps leftovers with this prefix from crashed runs.
	Prefix string
	// Hosts names the hosts, in order; names must be unique, non-empty and
	// free of '/' and white space.
	Hosts []string
	// Subnet holds the lab's IPv4 addresses: the router takes the first
	// usable one, host i the (2+i)th, the root namespace the last usable one.
	// When zero: DefaultSubnet, or with ConnectRoot the first /24 of
	// 198.18.0.0/15 that the root namespace neither routes nor holds.
	Subnet netip.Prefix
	// ConnectRoot gives the root namespace (this process and everything it
	// starts without a namespace, such as a kube-apiserver or kubectl) an
	// address in the lab and a route to it, so it can reach every host and be
	// reached from them. Nothing else of the root namespace is touched.
	ConnectRoot bool
	// MaxQueued bounds the packets held for delay at once; more are dropped
	// and counted in Stats. Zero means DefaultMaxQueued.
	MaxQueued int
}

// Host is one host of a lab.
type Host struct {
	Name      string     // as given in Config.Hosts
	Namespace string     // its network namespace, for `ip netns exec`
	Addr      netip.Addr // its one address, on its interface eth0

	lab   *Lab
	index int
	link  string // its veth's name in the router namespace
}

// Lab is a running network laboratory. Its methods are safe for concurrent use.
type Lab struct {
	Hosts      []*Host
	Router     string       // the router's namespace
	Subnet     netip.Prefix // the lab's addresses
	RouterAddr netip.Addr   // the router's address, every host's next hop
	RootAddr   netip.Addr   // the root namespace's address; invalid unless ConnectRoot
	RootLink   string       // the root namespace's veth; empty unless ConnectRoot

	cfg    Config
	delay  *delayer
	mu     sync.Mutex // serializes changes of delays, losses and links
	delays map[*Host]time.Duration
	losses map[*Host]float64
	links  map[[2]*Host]linkRule // by hostPair
	// diverted holds the hosts whose traffic the router sends through the
	// TUN: those with a delay, a loss or a link rule of their own. The
	// others' packets never reach user space.
	diverted map[*Host]bool
	created  []string // namespaces made so far, router first

	closeOnce sync.Once
	closeErr  error
}

// labSeq numbers the labs of this process; the namespace names carry the pid
// and this number, which is what lets Cleanup tell a crashed run's leftovers
// from a live lab of a concurrent test process.
var labSeq atomic.Uint64

// live holds the router namespaces of this process's open labs, so that a
// sweep never removes them even though their pid is alive.
var live sync.Map

// New builds a lab: a router namespace, one namespace per host joined to it
// by a veth pair, the TUN device and its goroutines, and with ConnectRoot a
// veth from the root namespace. ctx bounds only the setup; the lab runs until
// Close. Call Close (for example from t.Cleanup) whether or not the caller
// fails later; a failed New has already removed what it made.
func New(ctx context.Context, cfg Config) (*Lab, error) {
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if strings.ContainsAny(cfg.Prefix, "/ \t\n") {
		return nil, fmt.Errorf("netlab: prefix %q: must not contain '/' or white space", cfg.Prefix)
	}
	if cfg.MaxQueued == 0 {
		cfg.MaxQueued = DefaultMaxQueued
	}
	if cfg.MaxQueued < 0 {
		return nil, fmt.Errorf("netlab: max queued %d: must not be negative", cfg.MaxQueued)
	}
	if len(cfg.Hosts) == 0 {
		return nil, errors.New("netlab: no hosts")
	}
	seen := map[string]bool{}
	for _, name := range cfg.Hosts {
		if name == "" || strings.ContainsAny(name, "/ \t\n") {
			return nil, fmt.Errorf("netlab: host name %q: must be non-empty, without '/' or white space", name)
		}
		if seen[name] {
			return nil, fmt.Errorf("netlab: host name %q given twice", name)
		}
		seen[name] = true
	}
	subnet := cfg.Subnet
	if !subnet.IsValid() {
		subnet = DefaultSubnet // every candidate ConnectRoot may pick is a /24 too
	}
	if err := checkSubnet(subnet, len(cfg.Hosts)); err != nil {
		return nil, err
	}
	if err := Cleanup(ctx, cfg.Prefix); err != nil {
		return nil, err
	}

	l := &Lab{
		Router:   fmt.Sprintf("%s-%d-%d", cfg.Prefix, os.Getpid(), labSeq.Add(1)),
		cfg:      cfg,
		delays:   map[*Host]time.Duration{},
		losses:   map[*Host]float64{},
		links:    map[[2]*Host]linkRule{},
		diverted: map[*Host]bool{},
	}
	live.Store(l.Router, true)
	if err := l.build(ctx); err != nil {
		return nil, errors.Join(err, l.Close())
	}
	return l, nil
}

func (l *Lab) build(ctx context.Context) error {
	if err := l.addNamespace(ctx, l.Router); err != nil {
		return err
	}
	// Set before any interface exists, so that every one inherits them from
	// "default": packets the TUN hands back arrive on "dly" although the way
	// back to their source is another veth, which strict or loose reverse-path
	// filtering would drop; and forwarding is what a router is for.
	if err := doIn(nsPath(l.Router), func() error {
		return writeSysctls(map[string]string{
			"net/ipv4/conf/all/rp_filter":          "0",
			"net/ipv4/conf/default/rp_filter":      "0",
			"net/ipv4/conf/all/send_redirects":     "0",
			"net/ipv4/conf/default/send_redirects": "0",
			"net/ipv4/ip_forward":                  "1",
		})
	}); err != nil {
		return fmt.Errorf("netlab: router sysctls: %w", err)
	}

	if l.cfg.ConnectRoot {
		if err := l.connectRoot(ctx); err != nil {
			return err
		}
	} else {
		l.Subnet = l.cfg.Subnet
		if !l.Subnet.IsValid() {
			l.Subnet = DefaultSubnet
		}
	}
	l.RouterAddr = nthAddr(l.Subnet, 1)

	r := l.Router
	if err := ipAll(ctx,
		[]string{"-n", r, "link", "set", "lo", "up"},
		[]string{"-n", r, "addr", "add", l.RouterAddr.String() + "/32", "dev", "lo"},
	); err != nil {
		return err
	}
	if l.RootLink != "" {
		if err := ip(ctx, "-n", r, "route", "add", l.RootAddr.String()+"/32", "dev", "root", "src", l.RouterAddr.String()); err != nil {
			return err
		}
	}

	for i, name := range l.cfg.Hosts {
		h := &Host{
			Name:      name,
			Namespace: l.Router + "-" + name,
			Addr:      nthAddr(l.Subnet, 2+i),
			lab:       l,
			index:     i,
			link:      "h" + strconv.Itoa(i),
		}
		if err := l.addNamespace(ctx, h.Namespace); err != nil {
			return err
		}
		l.Hosts = append(l.Hosts, h)
		ns, a, ra := h.Namespace, h.Addr.String(), l.RouterAddr.String()
		if err := ipAll(ctx,
			[]string{"-n", r, "link", "add", h.link, "type", "veth", "peer", "name", hostLink, "netns", ns},
			[]string{"-n", ns, "link", "set", "lo", "up"},
			[]string{"-n", ns, "addr", "add", a + "/32", "dev", hostLink},
			[]string{"-n", ns, "link", "set", hostLink, "up"},
			// onlink: the router's address is in no subnet of the host's
			// own; and only the lab's subnet, so a host can reach nothing
			// outside the lab.
			[]string{"-n", ns, "route", "add", l.Subnet.String(), "via", ra, "dev", hostLink, "onlink"},
			[]string{"-n", r, "link", "set", h.link, "up"},
			[]string{"-n", r, "route", "add", a + "/32", "dev", h.link, "src", ra},
		); err != nil {
			return err
		}
	}

	d, err := startDelayer(ctx, l.Router, l.cfg.MaxQueued)
	if err != nil {
		return err
	}
	l.delay = d
	return nil
}

// connectRoot joins the root namespace to the router and claims the subnet
// there: adding the route is the claim, since the kernel refuses a second
// route to the same prefix ("File exists"), so two labs started at once
// cannot take the same one.
func (l *Lab) connectRoot(ctx context.Context) error {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Errorf("netlab: random link name: %w", err)
	}
	link := "nlab" + hex.EncodeToString(b[:]) // 12 bytes: within IFNAMSIZ
	if err := ip(ctx, "link", "add", link, "type", "veth", "peer", "name", "root", "netns", l.Router); err != nil {
		return err
	}
	l.RootLink = link
	if err := ipAll(ctx,
		[]string{"link", "set", link, "up"},
		[]string{"-n", l.Router, "link", "set", "root", "up"},
	); err != nil {
		return err
	}

	candidates := []netip.Prefix{l.cfg.Subnet}
	if !l.cfg.Subnet.IsValid() {
		candidates = candidates[:0]
		for p := netip.PrefixFrom(benchRange.Addr(), 24); benchRange.Contains(p.Addr()); p = nextPrefix(p) {
			candidates = append(candidates, p)
		}
	}
	for _, p := range candidates {
		taken, err := rootUses(ctx, p)
		if err != nil {
			return err
		}
		if taken {
			continue
		}
		err = ip(ctx, "route", "add", p.String(), "via", nthAddr(p, 1).String(), "dev", link, "onlink")
		if errors.Is(err, errExists) {
			continue
		}
		if err != nil {
			return err
		}
		l.Subnet = p
		l.RootAddr = lastAddr(p)
		return ip(ctx, "addr", "add", l.RootAddr.String()+"/32", "dev", link)
	}
	if l.cfg.Subnet.IsValid() {
		return fmt.Errorf("netlab: subnet %s is already routed or held in the root namespace", l.cfg.Subnet)
	}
	return fmt.Errorf("netlab: every /24 of %s is already routed or held in the root namespace", benchRange)
}

// rootUses reports whether the root namespace already routes to or holds an
// address in p (another lab, or a real network that uses the benchmarking
// range), so that a lab never steals a real route's traffic.
func rootUses(ctx context.Context, p netip.Prefix) (bool, error) {
	out, err := ipOutput(ctx, "-j", "-4", "route", "show", "table", "all")
	if err != nil {
		return false, err
	}
	var routes []struct {
		Dst string `json:"dst"`
	}
	if err := json.Unmarshal(out, &routes); err != nil {
		return false, fmt.Errorf("netlab: parse ip route: %w", err)
	}
	for _, r := range routes {
		if r.Dst == "default" || r.Dst == "" {
			continue
		}
		q, err := netip.ParsePrefix(r.Dst)
		if err != nil {
			a, aerr := netip.ParseAddr(r.Dst)
			if aerr != nil {
				continue
			}
			q = netip.PrefixFrom(a, a.BitLen())
		}
		if q.Overlaps(p) {
			return true, nil
		}
	}
	return false, nil
}

func (l *Lab) addNamespace(ctx context.Context, name string) error {
	if err := ip(ctx, "netns", "add", name); err != nil {
		return err
	}
	l.created = append(l.created, name)
	return nil
}

// Host returns the host named name, or nil.
func (l *Lab) Host(name string) *Host {
	for _, h := range l.Hosts {
		if h.Name == name {
			return h
		}
	}
	return nil
}

// SetDelay delays every packet to and from host by d, in each direction: a
// round trip between it and an undelayed host gains 2d, and a packet between
// two delayed hosts is held for the sum of their delays. A TCP connect to or
// from the host therefore takes at least 2d. d = 0 removes the delay (packets
// already held are still released on time). Changing d never reorders the
// packets of one source/destination pair.
func (l *Lab) SetDelay(host string, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("netlab: delay %v: must not be negative", d)
	}
	return l.change(host, func(ctx context.Context, h *Host) error {
		if d == 0 {
			delete(l.delays, h)
		} else {
			l.delays[h] = d
		}
		return l.apply(ctx)
	})
}

// SetLinkDelay delays every packet between hosts a and b by d, in each
// direction, on top of each host's own delay: a round trip between them gains
// 2d, and no other path is touched. d = 0 removes it.
func (l *Lab) SetLinkDelay(a, b string, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("netlab: link delay %v: must not be negative", d)
	}
	return l.changeLink(a, b, func(r *linkRule) { r.delay = d })
}

// SetLoss drops each packet to or from host with probability p, each packet
// on its own (independent, as radio loss is to a first approximation): a TCP
// handshake then loses its SYN or its SYN-ACK with probability 1-(1-p)^2, and
// the kernel retransmits it after its initial retransmission timeout. p = 0
// removes it; p = 1 drops everything.
func (l *Lab) SetLoss(host string, p float64) error {
	if !(p >= 0 && p <= 1) {
		return fmt.Errorf("netlab: loss %v: must be between 0 and 1", p)
	}
	return l.change(host, func(ctx context.Context, h *Host) error {
		if p == 0 {
			delete(l.losses, h)
		} else {
			l.losses[h] = p
		}
		return l.apply(ctx)
	})
}

// CutLink silently discards every packet between hosts a and b, in both
// directions, while each still reaches every other host and the root
// namespace: a partition of the two from each other alone. Connects between
// them time out rather than fail fast, as behind a real partition.
func (l *Lab) CutLink(a, b string) error {
	return l.changeLink(a, b, func(r *linkRule) { r.cut = true })
}

// MendLink undoes CutLink. Connections that survived the cut resume.
func (l *Lab) MendLink(a, b string) error {
	return l.changeLink(a, b, func(r *linkRule) { r.cut = false })
}

// Clear removes every delay, loss and link rule at once, as if each had been
// set back to none (LinkDown is not touched: LinkUp undoes it).
func (l *Lab) Clear() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	clear(l.delays)
	clear(l.losses)
	clear(l.links)
	return l.apply(ctx)
}

// change runs fn on the named host with the lab's changes serialized, under
// a context of its own: it is often called from cleanups and after a test's
// context has ended.
func (l *Lab) change(host string, fn func(context.Context, *Host) error) error {
	h := l.Host(host)
	if h == nil {
		return fmt.Errorf("netlab: no host %q", host)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	return fn(ctx, h)
}

// changeLink changes the rule of the link between two distinct hosts.
func (l *Lab) changeLink(a, b string, fn func(*linkRule)) error {
	ha, hb := l.Host(a), l.Host(b)
	switch {
	case ha == nil:
		return fmt.Errorf("netlab: no host %q", a)
	case hb == nil:
		return fmt.Errorf("netlab: no host %q", b)
	case ha == hb:
		return fmt.Errorf("netlab: link %s-%s: a link joins two different hosts", a, b)
	}
	return l.change(a, func(ctx context.Context, _ *Host) error {
		k := hostPair(ha, hb)
		r := l.links[k]
		fn(&r)
		if r == (linkRule{}) {
			delete(l.links, k)
		} else {
			l.links[k] = r
		}
		return l.apply(ctx)
	})
}

// hostPair is the key of the link between a and b in Lab.links.
func hostPair(a, b *Host) [2]*Host {
	if b.index < a.index {
		a, b = b, a
	}
	return [2]*Host{a, b}
}

// apply hands the delay goroutine the lab's rules and diverts through the TUN
// exactly the hosts that have one. The goroutine learns the rules before the
// router's new policy rules send it a host's first packet; a host no longer
// diverted has no rule left, so a packet of it still in flight is forwarded
// without hold. Called with l.mu held.
func (l *Lab) apply(ctx context.Context) error {
	im := &impairments{
		delay: make(map[[4]byte]time.Duration, len(l.delays)),
		loss:  make(map[[4]byte]float64, len(l.losses)),
		link:  make(map[[8]byte]linkRule, len(l.links)),
	}
	want := map[*Host]bool{}
	for h, d := range l.delays {
		im.delay[h.Addr.As4()] = d
		want[h] = true
	}
	for h, p := range l.losses {
		im.loss[h.Addr.As4()] = p
		want[h] = true
	}
	for k, r := range l.links {
		im.link[pairKey(k[0].Addr.As4(), k[1].Addr.As4())] = r
		want[k[0]], want[k[1]] = true, true
	}
	l.delay.setRules(im)
	for _, h := range l.Hosts { // in order, so that the rules' order is the same every run
		switch {
		case want[h] && !l.diverted[h]:
			if err := ipAll(ctx, h.ruleArgs("add")...); err != nil {
				return err
			}
			l.diverted[h] = true
		case !want[h] && l.diverted[h]:
			if err := ipAll(ctx, h.ruleArgs("del")...); err != nil {
				return err
			}
			delete(l.diverted, h)
		}
	}
	return nil
}

// Delay returns the delay set on host (0 for none or no such host).
func (l *Lab) Delay(host string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.delays[l.Host(host)]
}

// ruleArgs are the router's policy rules that send the host's traffic through
// the TUN device: what arrives from its veth, and what is addressed to it.
// Packets the TUN hands back match the rule of priority tunRulePriority first
// and go by the main table, so they are not sent round again.
func (h *Host) ruleArgs(verb string) [][]string {
	prio := strconv.Itoa(delayRulePriority)
	table := strconv.Itoa(delayTable)
	r := h.lab.Router
	return [][]string{
		{"-n", r, "rule", verb, "iif", h.link, "lookup", table, "priority", prio},
		{"-n", r, "rule", verb, "to", h.Addr.String() + "/32", "lookup", table, "priority", prio},
	}
}

// LinkDown partitions host: its link into the router goes down (the host
// sees no carrier) and the router silently discards what the rest of the lab
// sends it, the way a cut cable behind a switch looks from afar: connects
// time out rather than fail fast, and established connections stall rather
// than reset.
func (l *Lab) LinkDown(host string) error {
	return l.change(host, func(ctx context.Context, h *Host) error {
		return ipAll(ctx,
			[]string{"-n", l.Router, "link", "set", h.link, "down"},
			// Taking the link down removed its route; without this the
			// router would answer with ICMP unreachable, which no real
			// partition does.
			[]string{"-n", l.Router, "route", "replace", "blackhole", h.Addr.String() + "/32"},
		)
	})
}

// LinkUp undoes LinkDown. Connections that survived the partition resume.
func (l *Lab) LinkUp(host string) error {
	return l.change(host, func(ctx context.Context, h *Host) error {
		return ipAll(ctx,
			[]string{"-n", l.Router, "link", "set", h.link, "up"},
			[]string{"-n", l.Router, "route", "replace", h.Addr.String() + "/32", "dev", h.link, "src", l.RouterAddr.String()},
		)
	})
}

// Stats returns the delay goroutine's counters.
func (l *Lab) Stats() Stats {
	if l.delay == nil {
		return Stats{}
	}
	return l.delay.stats()
}

// Close stops the delay goroutines and removes every namespace (and with them
// every veth, rule and route inside), and the root namespace's veth and route.
// It is idempotent, and safe after a failed New or test. A namespace in which
// a process still runs, or a socket is still open, lingers unnamed until
// that ends: stop what you started in the hosts before Close, and close
// listeners and connections made with Host.Dial and Host.Listen.
func (l *Lab) Close() error {
	l.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		var errs []error
		if l.delay != nil {
			l.delay.close()
		}
		if l.RootLink != "" {
			// Deleted here rather than left to the router namespace's
			// teardown, which the kernel finishes asynchronously: the
			// root's route must be gone when Close returns.
			if err := ip(ctx, "link", "del", l.RootLink); err != nil {
				errs = append(errs, err)
			}
		}
		for i := len(l.created) - 1; i >= 0; i-- {
			if err := ip(ctx, "netns", "del", l.created[i]); err != nil {
				errs = append(errs, err)
			}
		}
		live.Delete(l.Router)
		l.closeErr = errors.Join(errs...)
	})
	return l.closeErr
}

// Cleanup deletes the namespaces that labs with this prefix left behind when
// their process died without Close: those whose name carries the pid of a
// process that no longer runs, or this process's pid but no open lab. New
// calls it; a namespace of a live concurrent test process is never touched.
// The veths, rules and routes inside go with the namespaces.
func Cleanup(ctx context.Context, prefix string) error {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	entries, err := os.ReadDir(netnsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("netlab: read %s: %w", netnsDir, err)
	}
	self := os.Getpid()
	var errs []error
	for _, e := range entries {
		name := e.Name()
		rest, ok := strings.CutPrefix(name, prefix+"-")
		if !ok {
			continue
		}
		f := strings.SplitN(rest, "-", 3)
		if len(f) < 2 {
			continue
		}
		pid, err := strconv.Atoi(f[0])
		if err != nil || pid <= 0 {
			continue
		}
		if _, err := strconv.ParseUint(f[1], 10, 64); err != nil {
			continue
		}
		router := prefix + "-" + f[0] + "-" + f[1]
		if pid == self {
			if _, ok := live.Load(router); ok {
				continue
			}
		} else if processExists(pid) {
			continue
		}
		if err := ip(ctx, "netns", "del", name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func processExists(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}

// Command returns a command that runs inside the host's namespace (through
// `ip netns exec`, which execs it: the process's pid is the program's, so
// signals such as SIGSTOP reach it directly). Inside, 127.0.0.1 is the host's
// own loopback and the host's only route is to the lab.
func (h *Host) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", h.Namespace, name}, args...)...)
}

// Do runs fn on an OS thread that is inside the host's network namespace.
// Sockets fn creates belong to the host for their whole life and may be used
// from any goroutine afterwards; goroutines fn starts run outside the host.
func (h *Host) Do(fn func() error) error {
	return doIn(nsPath(h.Namespace), fn)
}

// Dial connects from inside the host, like net.Dialer.DialContext.
func (h *Host) Dial(ctx context.Context, network, address string) (net.Conn, error) {
	var c net.Conn
	err := h.Do(func() error {
		var err error
		var d net.Dialer
		c, err = d.DialContext(ctx, network, address)
		return err
	})
	return c, err
}

// Listen listens inside the host, like net.ListenConfig.Listen.
func (h *Host) Listen(ctx context.Context, network, address string) (net.Listener, error) {
	var ln net.Listener
	err := h.Do(func() error {
		var err error
		var lc net.ListenConfig
		ln, err = lc.Listen(ctx, network, address)
		return err
	})
	return ln, err
}

// AddrPort is the host's address with port, as a dial or listen address.
func (h *Host) AddrPort(port uint16) string {
	return netip.AddrPortFrom(h.Addr, port).String()
}

func checkSubnet(p netip.Prefix, hosts int) error {
	if !p.Addr().Is4() {
		return fmt.Errorf("netlab: subnet %s: must be IPv4", p)
	}
	if p.Masked() != p {
		return fmt.Errorf("netlab: subnet %s: host bits set (want %s)", p, p.Masked())
	}
	// network, router, hosts, root, broadcast
	need := uint64(hosts) + 4
	if size := uint64(1) << (32 - p.Bits()); size < need {
		return fmt.Errorf("netlab: subnet %s holds %d addresses, %d hosts need %d", p, size, hosts, need)
	}
	return nil
}

func nthAddr(p netip.Prefix, n int) netip.Addr {
	a := p.Masked().Addr().As4()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	v += uint32(n)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// lastAddr is the last usable address: the one before the broadcast address.
func lastAddr(p netip.Prefix) netip.Addr {
	return nthAddr(p, 1<<(32-p.Bits())-2)
}

func nextPrefix(p netip.Prefix) netip.Prefix {
	return netip.PrefixFrom(nthAddr(p, 1<<(32-p.Bits())), p.Bits())
}
