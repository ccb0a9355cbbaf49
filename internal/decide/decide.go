// Package decide is fleet-role's decision core: from the settings, every
// host's probe entry, the Nodes, the previous status and the current time,
// it judges each host fit, unfit or unknown with every reason and its
// numbers, and plans the swap of an unfit voter for a fit standby that it
// would make, or says why it would make none.
//
// Decide is pure: no client, clock, logger or file. The controller and
// `fleet-role decide` gather its Input (kube.go adapts the Kubernetes
// objects) and publish the Status it returns; the status document is exactly
// that Status's JSON.
package decide

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/quantile"
	"github.com/fleet-role/fleet-role/internal/record"
	"github.com/fleet-role/fleet-role/internal/settings"
)

// Decide makes one decision. It never fails: a host whose entry cannot be
// read is unknown with the error as its reason, and the others are judged.
func Decide(in Input) Status {
	s := in.Settings
	now := in.Now.UTC()
	prev := map[string]*Observation{}
	if in.Previous != nil {
		for _, h := range in.Previous.Hosts {
			if h.Observation != nil {
				prev[h.Name] = h.Observation
			}
		}
	}
	nodes := slices.SortedFunc(slices.Values(in.Nodes), func(a, b Node) int { return cmp.Compare(a.Name, b.Name) })

	j := limitsOf(s)
	var hosts []*host
	byName := map[string]*host{}
	for _, n := range nodes {
		if byName[n.Name] != nil {
			continue // a Node name is unique; a repeat adds nothing
		}
		h := &host{node: n}
		if why, ok := in.Unreadable[n.Name]; ok {
			h.hasEntry, h.wasRead, h.readErr = true, true, errors.New(why)
		} else if raw, ok := in.Entries[n.Name]; ok {
			h.raw, h.hasEntry = raw, true
			h.obs = observe(prev[n.Name], raw, now)
			if n.Voter {
				// A labelled node's role depends on its entry (a learner);
				// every other entry is read only when its host is judged.
				h.read(s, &j.dec, true)
			}
		}
		h.role = roleOf(n, latestEtcd(h.window))
		if h.role == RoleOther && !h.hasEntry {
			continue // a host that records nothing has nothing to report
		}
		hosts = append(hosts, h)
		byName[n.Name] = h
	}

	var voters []string // every member the probes connect to
	members := map[string]string{}
	for _, h := range hosts {
		if h.isMember() {
			voters = append(voters, h.node.Name)
			if x := latestEtcd(h.window); x != nil && x.MemberID != "" {
				members[x.MemberID] = h.node.Name
			}
		}
	}
	for _, h := range hosts {
		h.judge(j, now, voters, members)
	}
	mirrorSlowLinks(hosts, byName)
	for _, h := range hosts {
		slices.SortStableFunc(h.reasons, func(a, b Reason) int {
			return cmp.Or(cmp.Compare(signalOrder[a.Signal], signalOrder[b.Signal]), cmp.Compare(a.Subject, b.Subject))
		})
		h.verdict = verdictOf(h.reasons)
	}

	mem := remember(in.Previous, hosts, now)
	d := planSafely(s, now, hosts, in.Previous, &mem)
	st := Status{
		Schema:      Schema,
		Form:        FormFull,
		GeneratedAt: now,
		DryRun:      s.DryRun,
		Settings:    Settings{Values: s, Limits: s.Limits()},
		Hosts:       make([]Host, 0, len(hosts)),
		Decision:    d,
		Memory:      mem,
		Records:     Records{CapBytes: record.CapBytes(s.Window, s.MaxServers)},
	}
	for _, h := range hosts {
		st.Hosts = append(st.Hosts, Host{Name: h.node.Name, Role: h.role, Eligible: h.node.Eligible, Pinned: h.node.Pinned,
			Verdict: h.verdict, Samples: h.samples, RecordBytes: len(h.raw), Reasons: h.reasons, Observation: h.obs})
	}
	st.FailureTolerance = toleranceOf(st.Hosts)
	// Every record counts, a host's the decision leaves out (neither voter
	// nor eligible any more) too: they are what fleet-role stores.
	for _, name := range sortedKeys(in.Entries) {
		b := len(in.Entries[name])
		st.Records.Count++
		st.Records.TotalBytes += b
		if b > st.Records.LargestBytes {
			st.Records.LargestBytes, st.Records.Largest = b, name
		}
	}
	return st
}

// decodeEntry reads one host's entry. A panic in the reader is that entry's
// error: the other hosts are still judged.
//
// The entry is read with dec: kept, into memory of its own and only the
// decoding's scratch from dec's; else into memory dec's next entry reuses.
func decodeEntry(dec *entry.Decoder, kept bool, raw, node string, l entry.Limits) (e entry.Entry, connects map[string]*entry.Connects, err error) {
	defer func() {
		if p := recover(); p != nil {
			e, connects, err = entry.Entry{}, nil, fmt.Errorf("reading the entry panicked: %s", clip(fmt.Sprint(p)))
		}
	}()
	// By voter: the connects are judged voter by voter, and a map per
	// sample was most of what reading an entry allocated.
	if kept {
		e, connects, err = dec.DecodeKeptByVoter(raw, l)
	} else {
		e, connects, err = dec.DecodeByVoter(raw, l)
	}
	clipEntry(&e, connects)
	if err == nil && e.Node != node {
		err = fmt.Errorf("the entry names node %q but is stored under %q", clip(e.Node), node)
	}
	return e, connects, err
}

// judgeHook, when set (by tests), runs before each host is judged.
var judgeHook func(node string)

// read decodes the host's entry with dec and takes its window. A host whose
// window is let go once it is judged (not an etcd member) reads it into the
// memory of the host judged before it; an etcd member's window outlives its
// judging and is kept, in memory of its own.
func (h *host) read(s settings.Settings, dec *entry.Decoder, kept bool) {
	h.wasRead = true
	e, connects, err := decodeEntry(dec, kept, h.raw, h.node.Name, entry.LimitsFor(s.Window, s.MaxServers))
	if err != nil {
		h.readErr = err
		return
	}
	h.entry, h.decoded = e, true
	h.window, h.connects = e.Samples, connects
	if from := len(h.window) - s.Window; from > 0 {
		h.window = h.window[from:]
		for v, c := range connects {
			h.connects[v] = c.Slice(from)
		}
	}
	// An etcd member's window and connects outlive its judging: the plan
	// reads its connects by voter (fitOutside); every other host's are let
	// go. Its histograms were read into dec's memory, which dec's next entry
	// reuses: merged now, the one use the decision has for them, and
	// dropped from its samples.
	if kept {
		h.merged = mergeEtcd(h.window)
		for i := range e.Samples {
			if x := e.Samples[i].Etcd; x != nil {
				x.WALFsync, x.BackendCommit, x.PeerRTT = quantile.Histogram{}, quantile.Histogram{}, nil
			}
		}
	}
}

// judge judges one host. A panic while judging it makes that host unknown
// with the panic's value as its reason, and leaves its samples out of the
// rest of the decision; the other hosts are judged as usual. The samples of
// a host that is not an etcd member are let go once it is judged: the plan
// reads only its reasons, and a fleet's decoded windows would otherwise all
// be held at once.
func (h *host) judge(j *limits, now time.Time, voters []string, members map[string]string) {
	s := j.s
	defer func() {
		if p := recover(); p != nil {
			h.window, h.connects, h.decoded, h.judged = nil, nil, false, false
			h.reasons = []Reason{unmeasured(SignalEntry, "", panicBasis,
				"judging this host's entry panicked: "+clip(fmt.Sprint(p)), false)}
		}
		h.samples = len(h.window)
		if !h.isMember() {
			h.window, h.connects, h.entry = nil, nil, entry.Entry{}
		}
	}()
	if judgeHook != nil {
		judgeHook(h.node.Name)
	}
	if h.hasEntry && !h.wasRead {
		h.read(s, &j.dec, h.isMember())
	}
	if h.reasons == nil {
		// Room for every reason measure can give: the evidence (record,
		// samples, freshness), the link, a connect to each voter, the disk,
		// memory, stall and reading errors; a member's etcd has a round trip
		// to each other member, its two disks and its failed scrapes.
		n := 9 + len(voters)
		if h.isMember() {
			n += len(voters) + 2
		}
		h.reasons = make([]Reason, 0, n)
	}
	h.evidence(j, now, h.readErr)
	if h.decoded {
		h.measure(j, voters, members)
	}
}

const panicBasis = "a host is judged only when judging it completes; a panic is a fault of fleet-role's, reported on the host whose entry caused it and never held against the others"

// StepPlan is the decision's reason when planning itself panicked.
const StepPlan = "plan"

// planSafely plans the swap; a panic while planning is a decision of none,
// with the panic as its reason, so that the verdicts are still published.
func planSafely(s settings.Settings, now time.Time, hosts []*host, prev *Status, mem *Memory) (d Decision) {
	defer func() {
		if p := recover(); p != nil {
			d = Decision{Action: ActionNone, Reasons: []Reason{step(StepPlan, "", panicBasis, false,
				"planning panicked: "+clip(fmt.Sprint(p)))}}
		}
	}()
	return plan(s, now, hosts, prev, mem)
}

// observe carries when the controller first saw this exact entry, so that
// staleness never compares the probe's clock with the controller's.
func observe(prev *Observation, raw string, now time.Time) *Observation {
	o := &Observation{Digest: Digest(raw), ChangedAt: now}
	if prev != nil && prev.Digest == o.Digest && !prev.ChangedAt.IsZero() && !prev.ChangedAt.After(now) {
		o.ChangedAt = prev.ChangedAt.UTC()
	}
	return o
}

// mirrorSlowLinks names a slow link on both its ends. Between two voters it
// makes both unfit: either end may be the one on the poor path, and the voter
// on the most slow links is the one replaced. A slow link that a host which
// does not vote measured to a voter is named on the voter but held only
// against the measuring host: a voter is judged by the paths the quorum uses,
// and a poor path from one standby must not make a healthy voter the one to
// swap out (for that very standby, which would then be judged without it).
// Only measurements of judged hosts (a full, fresh window) count against
// another host.
func mirrorSlowLinks(hosts []*host, byName map[string]*host) {
	for _, x := range hosts {
		if !x.judged {
			continue
		}
		for _, r := range x.reasons {
			if !isLink(r) || r.OK {
				continue
			}
			y := byName[r.Subject]
			if y == nil || hasSlowLink(y.reasons, x.node.Name) {
				continue
			}
			m := r
			m.Subject = x.node.Name
			// The copy repeats the numbers, not the entry's error texts,
			// which stay in the measuring host's own reason.
			detail := cmp.Or(r.brief, r.Detail)
			if r.brief != "" && r.brief != r.Detail {
				detail += " (the latest error is in " + x.node.Name + "'s reasons)"
			}
			m.Detail, m.brief = "measured by "+x.node.Name+": "+detail, ""
			if !votes(x) && votes(y) {
				m.Value, m.Limit, m.OK = nil, nil, true
				m.Detail += "; held against " + x.node.Name + ", which does not vote, not against this voter, whose paths to the other voters decide"
			}
			y.reasons = append(y.reasons, m)
		}
	}
}

// votes reports a host that holds an etcd vote or is becoming one.
func votes(h *host) bool { return h.role == RoleVoter || h.role == RoleLearner }

func hasSlowLink(rs []Reason, other string) bool {
	for _, r := range rs {
		if isLink(r) && !r.OK && r.Subject == other {
			return true
		}
	}
	return false
}

// slowLinks lists the other ends of a host's slow links.
func slowLinks(rs []Reason) []string {
	set := map[string]bool{}
	for _, r := range rs {
		if isLink(r) && !r.OK {
			set[r.Subject] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

func verdictOf(rs []Reason) Verdict {
	v := Fit
	for _, r := range rs {
		if r.OK {
			continue
		}
		if r.unknown {
			return Unknown
		}
		v = Unfit
	}
	return v
}

// remember carries the voter set and when it last changed. A change seen
// between two decisions dates from the later one. With no previous decision
// (a controller's first), the set dates from the latest of its voters' k3s
// EtcdIsVoter transitions when every voter has one, since k3s saw them become
// voters; otherwise from now, which holds any swap back for a cooldown rather
// than guess that the set is old.
func remember(prev *Status, hosts []*host, now time.Time) Memory {
	m := Memory{Voters: []string{}, VotersChangedAt: now}
	var latest time.Time
	known := true
	for _, h := range hosts {
		if h.role != RoleVoter {
			continue
		}
		m.Voters = append(m.Voters, h.node.Name)
		if h.node.VoterSince.IsZero() {
			known = false
		} else if h.node.VoterSince.After(latest) {
			latest = h.node.VoterSince
		}
	}
	if prev != nil && slices.Equal(prev.Memory.Voters, m.Voters) && !prev.Memory.VotersChangedAt.IsZero() && !prev.Memory.VotersChangedAt.After(now) {
		m.VotersChangedAt = prev.Memory.VotersChangedAt.UTC()
		return m
	}
	if prev == nil && known && len(m.Voters) > 0 && !latest.After(now) {
		m.VotersChangedAt = latest.UTC()
	}
	return m
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
