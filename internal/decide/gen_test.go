package decide_test

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleet-role/fleet-role/internal/decide"
	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/k3snode"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/quantile"
	"github.com/fleet-role/fleet-role/internal/record"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
)

// The bucket layouts of real etcd v3.6 (prometheus.ExponentialBuckets).
var (
	walBounds        = exponential(0.001, 2, 14)
	rttBounds        = exponential(0.0001, 2, 16)
	baseNow          = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	gib       uint64 = 1 << 30
)

func exponential(start, factor float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = start
		start *= factor
	}
	return out
}

// gHost is one host of a generated fleet.
type gHost struct {
	name     string
	voter    bool // the etcd role label
	learner  bool // k3s's learner condition and etcd's is_learner
	eligible *bool
	pinned   *bool
	// server: a standby that is a k3s server with etcd disabled (the
	// control-plane label), not an agent.
	server  bool
	samples int     // 0: a full window
	wifi    bool    // the default route leaves by Wi-Fi
	slowWAL bool    // WAL fsyncs of 16 to 32 ms on a voter, a 20 ms fdatasync on a standby
	lowMem  bool    // 1 GiB available, under the 2 GiB quota
	connect float64 // extra connect time to every voter, seconds
	// stall adds connect time, seconds, to sample i of n (a stall of the
	// whole machine that some samples caught).
	stall func(i, n int) float64
	// late is sample i of n's wake-up lateness, seconds (a host starved of
	// CPU); nil: a healthy host's, healthyLate.
	late    func(i, n int) float64
	raw     string // the entry text as is (a malformed entry)
	noEntry bool
	// record, when set, changes the host's record after it is made (a
	// record written around the admission policy).
	record func(cm *corev1.ConfigMap)
	// until is when the last sample was taken (default: a second before now).
	until time.Time
	// created is its Node's creationTimestamp (zero: none set).
	created time.Time
	// lie, when set, changes the host's generated entry before it is
	// written: a record crafted by a compromised host (trust_test.go).
	lie func(e *entry.Entry)
	// etcdMod and connectMod change sample i of n's etcd sample and its
	// connect to voter to, after they are made.
	etcdMod    func(i, n int, x *entry.EtcdSample)
	connectMod func(i, n int, to string, c *entry.Connect)
}

func yes() *bool { b := true; return &b }
func no() *bool  { b := false; return &b }

// gFleet generates a scenario's inputs: every host's entry from a model of
// its links and disks, so that the inputs stay consistent with each other.
type gFleet struct {
	s     settings.Settings
	now   time.Time
	hosts []*gHost
	// slow adds latency, seconds one way, to the path between two hosts.
	slow map[[2]string]float64
	// rttOnly adds time, seconds one way, to etcd's round trip between two
	// voters but not to their connects: etcd's own state rather than the
	// path (a slow leader raises it between two followers).
	rttOnly map[[2]string]float64
	// k3sNodes writes the Nodes as k3s does in full: the Ready condition
	// and the command line (k3s.io/node-args), the first host the
	// --cluster-init server, every other server joined to it with
	// --server. Acting reads them; the decision does not.
	k3sNodes bool
	// leader is the voter whose etcd samples say it leads; empty: the
	// first voter.
	leader string
}

func pairOf(a, b string) [2]string {
	if a > b {
		a, b = b, a
	}
	return [2]string{a, b}
}

func seed(parts ...string) uint64 {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

func memberID(name string) string { return strconv.FormatUint(seed("member", name)>>1, 16) }

func (f *gFleet) members() []*gHost {
	var out []*gHost
	for _, h := range f.hosts {
		if h.voter {
			out = append(out, h)
		}
	}
	return out
}

// oneWay is the modelled one-way delay between two hosts: a LAN's fraction
// of a millisecond, plus any slowness of the path.
func (f *gFleet) oneWay(a, b string) float64 {
	base := 0.0002 + float64(seed(pairOf(a, b)[0], pairOf(a, b)[1])%300)*1e-6
	return base + f.slow[pairOf(a, b)]
}

func bucket(bounds []float64, v float64) int {
	i, _ := slices.BinarySearch(bounds, v)
	return i
}

func hist(bounds []float64, obs map[int]uint64) quantile.Histogram {
	h := quantile.Histogram{Bounds: bounds, Counts: make([]uint64, len(bounds)+1)}
	for b, c := range obs {
		h.Counts[b] += c
	}
	return h
}

// entryOf generates h's entry.
func (f *gFleet) entryOf(h *gHost) entry.Entry {
	n := h.samples
	if n == 0 {
		n = f.s.Window
	}
	until := h.until
	if until.IsZero() {
		until = f.now.Add(-time.Second)
	}
	members := f.members()
	rng := rand.New(rand.NewPCG(seed(h.name), uint64(n)))
	// The wake-up lateness draws from a source of its own, so that the
	// other figures are those of the scenarios before it had one.
	lateRng := rand.New(rand.NewPCG(seed(h.name, "wakeup"), uint64(n)))
	e := entry.Entry{Node: h.name}
	leader := f.leader
	if leader == "" && len(members) > 0 {
		leader = members[0].name
	}
	for i := range n {
		at := until.Add(-time.Duration(n-1-i) * f.s.SamplePeriod).Add(time.Duration(rng.IntN(400)) * time.Millisecond)
		s := entry.Sample{At: at, Restart: i == 0, Link: entry.Link{Interface: "eth0", Class: entry.ClassWired},
			Connect: map[string]entry.Connect{}}
		if h.wifi {
			s.Link = entry.Link{Interface: "wlan0", Class: entry.ClassWifi}
		}
		for _, m := range members {
			if m.name == h.name {
				continue
			}
			// A connect is one round trip (SYN, SYN-ACK).
			rt := 2*f.oneWay(h.name, m.name) + h.connect + rng.Float64()*0.0004
			if h.stall != nil {
				rt += h.stall(i, n)
			}
			c := entry.Connect{Seconds: rt}
			if h.connectMod != nil {
				h.connectMod(i, n, m.name, &c)
			}
			s.Connect[m.name] = c
		}
		s.MemTotalBytes = 16 * gib
		s.MemAvailableBytes = 9*gib + uint64(rng.IntN(1<<20))*1024
		if h.lowMem {
			s.MemAvailableBytes = gib + uint64(rng.IntN(1<<20))*1024
		}
		if i > 0 {
			stall := float64(rng.IntN(2000)) * 1e-6
			s.MemFullStallSeconds = &stall
			// No wake-up reading in the first sample after a start: no
			// timer has fallen due.
			late := healthyLate(lateRng)
			if h.late != nil {
				late = h.late(i, n)
			}
			s.WakeupLateSeconds = &late
		}
		if h.voter {
			x := &entry.EtcdSample{MemberID: memberID(h.name), IsLeader: h.name == leader, IsLearner: h.learner,
				HasLeader: true, ConnectedPeers: len(members) - 1, KnownPeers: len(members) - 1,
				DBSizeBytes: 24<<20 + uint64(i)*4096, QuotaBytes: 2 * gib, PeerRTT: map[string]quantile.Histogram{}}
			wal := map[int]uint64{0: 150 + uint64(rng.IntN(100)), 1: 30 + uint64(rng.IntN(20)), 2: uint64(rng.IntN(4))}
			if h.slowWAL {
				wal = map[int]uint64{4: 20, 5: 120 + uint64(rng.IntN(40))}
			}
			x.WALFsync = hist(walBounds, wal)
			x.BackendCommit = hist(walBounds, map[int]uint64{1: 50 + uint64(rng.IntN(20)), 2: 10 + uint64(rng.IntN(5))})
			for _, m := range members {
				if m.name == h.name || i == 0 {
					continue
				}
				// etcd feeds the round-trip histogram about twice every 30 s:
				// about one observation per 15 s sample.
				rt := 2*(f.oneWay(h.name, m.name)+f.rttOnly[pairOf(h.name, m.name)]) + rng.Float64()*0.0004
				obs := map[int]uint64{}
				if i%2 == 1 || rng.IntN(2) == 0 {
					obs[bucket(rttBounds, rt)] = 1
				}
				x.PeerRTT[memberID(m.name)] = hist(rttBounds, obs)
			}
			if h.etcdMod != nil {
				h.etcdMod(i, n, x)
			}
			s.Etcd = x
		}
		entry.Append(&e, s, f.s.Window)
	}
	if !h.voter {
		e.Fsync = &entry.FsyncReading{At: until.Add(-10 * time.Minute), Dir: "/var/lib/rancher/k3s/server/db/fleet-role",
			Filesystem: "ext4", MeasuredDisk: true, Writes: 10000, P99Seconds: 0.0021, MaxSeconds: 0.0084}
		if h.slowWAL {
			e.Fsync.P99Seconds, e.Fsync.MaxSeconds = 0.02, 0.031
		}
	}
	return e
}

// healthyLate is an unstarved host's wake-up lateness: 1 to 16 ms
// (lab/cmd/votercpu measured 5 to 17 ms on a quiet machine).
func healthyLate(rng *rand.Rand) float64 { return float64(1000+rng.IntN(15000)) * 1e-6 }

// starvedLate is a host starved of CPU: its timer wakes 850 to 950 ms late
// (lab/cmd/votercpu: about 900 ms at 1 to 2% of a core with a 1 s CFS period).
func starvedLate(i, n int) float64 {
	return 0.85 + float64(seed("starved", strconv.Itoa(i))%100_000)*1e-6
}

func (f *gFleet) rawEntry(t testing.TB, h *gHost) string {
	if h.raw != "" {
		return h.raw
	}
	e := f.entryOf(h)
	if h.lie != nil {
		h.lie(&e)
	}
	text, err := entry.Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// records is the probes' records as the controller lists them and
// `kubectl get configmap -l fleet-role.io/record -o json` prints
// them: a List of one ConfigMap per recording host, owned by its Node.
func (f *gFleet) records(t testing.TB) corev1.ConfigMapList {
	list := corev1.ConfigMapList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}}
	for _, h := range f.hosts {
		if h.noEntry {
			continue
		}
		cm := record.Object(f.s.Namespace, record.Owner{Name: h.name, UID: nodeUID(h.name)}, f.rawEntry(t, h))
		if h.record != nil {
			h.record(cm)
		}
		list.Items = append(list.Items, *cm)
	}
	return list
}

// nodeUID is a host's Node UID, made from its name.
func nodeUID(name string) types.UID {
	return types.UID(fmt.Sprintf("%08x-0000-4000-8000-%012x", seed("uid", name)>>32, seed("uid", name)&0xffffffffffff))
}

func (f *gFleet) nodes() corev1.NodeList {
	list := corev1.NodeList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}}
	for i, h := range f.hosts {
		ip := fmt.Sprintf("10.0.0.%d", 10+i)
		n := corev1.Node{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
			ObjectMeta: metav1.ObjectMeta{Name: h.name, UID: nodeUID(h.name), CreationTimestamp: metav1.NewTime(h.created), Labels: map[string]string{"kubernetes.io/hostname": h.name}, Annotations: map[string]string{}},
			Status:     corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}},
		}
		if h.voter {
			n.Labels[k3snode.EtcdRoleLabel] = "true"
			n.Labels["node-role.kubernetes.io/control-plane"] = "true"
			n.Annotations[k3snode.NodeAddressAnnotation] = ip
			n.Annotations["etcd.k3s.cattle.io/node-name"] = h.name + "-" + memberID(h.name)[:8]
			cond := corev1.NodeCondition{Type: k3snode.EtcdIsVoterCondition, Status: corev1.ConditionTrue, Reason: "MemberNotLearner"}
			if h.learner {
				cond.Status, cond.Reason = corev1.ConditionFalse, k3snode.MemberIsLearner
			}
			n.Status.Conditions = append(n.Status.Conditions, cond)
		}
		if h.server {
			n.Labels["node-role.kubernetes.io/control-plane"] = "true"
		}
		if f.k3sNodes {
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"})
			args := `["agent","--server","https://10.0.0.10:6443"]`
			switch {
			case i == 0:
				args = `["server","--cluster-init"]`
			case h.voter:
				args = `["server","--server","https://10.0.0.10:6443"]`
			case h.server:
				args = `["server","--server","https://10.0.0.10:6443","--disable-etcd","true"]`
			}
			n.Annotations[k3snode.NodeArgsAnnotation] = args
		}
		if h.eligible != nil {
			n.Labels[f.s.EligibleLabel] = strconv.FormatBool(*h.eligible)
		}
		if h.pinned != nil {
			n.Labels[f.s.PinnedLabel] = strconv.FormatBool(*h.pinned)
		}
		list.Items = append(list.Items, n)
	}
	return list
}

// input is the decision's input as the controller builds it from the
// records, and the CLI from the file that lists them.
func (f *gFleet) input(t testing.TB, prev *status.Status) decide.Input {
	list := f.records(t)
	records := make([]*corev1.ConfigMap, len(list.Items))
	for i := range list.Items {
		records[i] = &list.Items[i]
	}
	entries, unreadable := record.ReadAll(records)
	return decide.Input{Now: f.now, Settings: f.s, Nodes: kube.NodesFromKube(f.nodes().Items, f.s),
		Entries: entries, Unreadable: unreadable, Previous: prev}
}

func mustJSON(t testing.TB, v any) []byte {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// standardFleet is three voters and two standbys, all marked eligible and
// none pinned, on a healthy LAN.
func standardFleet(s settings.Settings) *gFleet {
	return &gFleet{s: s, now: baseNow, slow: map[[2]string]float64{}, hosts: []*gHost{
		{name: "alpha", voter: true, eligible: yes(), pinned: no()},
		{name: "bravo", voter: true, eligible: yes(), pinned: no()},
		{name: "charlie", voter: true, eligible: yes(), pinned: no()},
		{name: "delta", eligible: yes(), pinned: no()},
		{name: "echo", eligible: yes(), pinned: no()},
	}}
}

func (f *gFleet) host(name string) *gHost {
	for _, h := range f.hosts {
		if h.name == name {
			return h
		}
	}
	panic("no host " + name)
}

// settled is a previous status whose voter set formed long ago.
func settled(f *gFleet, ago time.Duration) *status.Status {
	var voters []string
	for _, h := range f.hosts {
		if h.voter && !h.learner {
			voters = append(voters, h.name)
		}
	}
	return &status.Status{Schema: status.Schema, GeneratedAt: f.now.Add(-f.s.SamplePeriod), DryRun: true,
		Settings: status.Settings{Values: f.s, Limits: f.s.Limits()}, Hosts: []status.Host{},
		Decision: status.Decision{Action: status.ActionNone, Reasons: []status.Reason{}}, Links: []status.LinkRow{},
		Memory: status.Memory{Voters: voters, VotersChangedAt: f.now.Add(-ago)}}
}

// decideSteady decides as the controller does once per period while every
// probe keeps writing: the decision, then, while a swap is named and held,
// the next one a period on with every record changed (the previous status's
// observations keep only the member IDs they held, so each record reads as
// changed at the new decision). It returns the last: a swap that stays
// named is then published, at the second decision.
func decideSteady(in decide.Input) status.Status {
	st := decide.Decide(in)
	for range 3 {
		if st.Memory.Named == "" || st.Decision.Action == status.ActionSwap {
			break
		}
		in.Previous = everyRecordChanged(st)
		in.Now = in.Now.Add(in.Settings.SamplePeriod)
		st = decide.Decide(in)
	}
	return st
}

// everyRecordChanged is st as the previous status of a decision at which
// every record has changed: its observations keep only the member IDs.
func everyRecordChanged(st status.Status) *status.Status {
	prev := st
	prev.Hosts = slices.Clone(st.Hosts)
	for i := range prev.Hosts {
		if o := prev.Hosts[i].Observation; o != nil {
			prev.Hosts[i].Observation = &status.Observation{MemberID: o.MemberID}
		}
	}
	return &prev
}

// namedBefore marks prev, a period before the decision, as a decision that
// named out to leave, so that the next one, every record having changed
// since, publishes the swap.
func namedBefore(prev *status.Status, out string) *status.Status {
	prev.Memory.Named, prev.Memory.NamedDecisions, prev.Memory.NamedSince = out, 1, prev.GeneratedAt
	return prev
}
