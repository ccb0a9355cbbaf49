// Package decide is fleet-role's decision core: from the settings, every
// host's probe entry, the Nodes, the previous status and the current time,
// it judges each host fit, unfit or unknown with every reason and its
// numbers, and plans the swap of an unfit voter for a fit standby that it
// would make, or says why it would make none.
//
// Decide is pure: no client, clock, logger or file. The controller and
// `fleet-role decide` gather its Input (internal/kube adapts the Kubernetes
// objects) and publish the status.Status it returns; the status document
// is exactly its JSON (internal/status). Only the controller and the CLI
// import this package: the probe, the alerts, the Node events and the
// status page read the document, not the core.
package decide

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/k3snode"
	"github.com/fleet-role/fleet-role/internal/quantile"
	"github.com/fleet-role/fleet-role/internal/record"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
)

// Decide makes one decision. It never fails: a host whose entry cannot be
// read is unknown with the error as its reason, and the others are judged.
//
// It goes in three steps: every host is judged into typed judgements and a
// link matrix (assess), the plan is made from those (plan.go), and the
// reasons are written last, into the Status.
func Decide(in Input) status.Status { return decide(in, nil) }

// decide is Decide with before, when not nil, called as each host's judging
// begins, inside the recovery that makes a panic that host's unknown: the
// seam through which a test makes judging one host panic, passed in rather
// than held in a variable, so that Decide shares no state between calls.
func decide(in Input, before func(node string)) status.Status {
	in.Previous = reanchored(in.Previous, in.PreviousAt)
	a := assessJudging(in, before)
	s, now := a.j.s, a.j.now
	mem := remember(in.Previous, a.hosts, now)
	a.j.protection = protect(in.Previous, in, a.hosts, &mem, now, a.j.stale.Duration())
	d := planSafely(a.j, a.hosts, a.links, in.Previous, &mem)
	st := status.Status{
		Schema:      status.Schema,
		Form:        status.FormFull,
		GeneratedAt: now,
		DryRun:      s.DryRun,
		Settings:    status.Settings{Values: s, Limits: s.Limits()},
		Hosts:       make([]status.Host, 0, len(a.hosts)),
		Decision:    d,
		Links:       a.links.published(a.hosts),
		Memory:      mem,
		Records:     status.Records{CapBytes: record.CapBytes(s.Window, s.MaxServers)},
	}
	// Each host's deciding index, from one block.
	deciding := make([]int, len(a.hosts))
	for i, h := range a.hosts {
		var at *int
		if deciding[i] = h.deciding(); deciding[i] >= 0 {
			at = &deciding[i]
		}
		st.Hosts = append(st.Hosts, status.Host{Name: h.node.Name, Role: h.role, Eligible: h.node.Eligible, Pinned: h.node.Pinned,
			Verdict: h.verdict, Samples: h.samples, RecordBytes: len(h.raw), Reasons: h.reasons(a.j), Deciding: at,
			Observation: h.obs, Member: h.member()})
	}
	clearByAttribution(a.hosts, st.Hosts, d.Implicated)
	st.Timing = timingOf(s, a.hosts, st.Links, d.Implicated)
	st.FailureTolerance = status.ToleranceOf(st.Hosts)
	// Every record counts, a host's the decision leaves out (neither voter
	// nor eligible, or no Node) too: they are what fleet-role stores.
	sizes := make(map[string]int, len(in.Entries)+len(in.Unheld))
	for name, text := range in.Entries {
		sizes[name] = len(text)
	}
	maps.Copy(sizes, in.Unheld)
	for _, name := range sortedKeys(sizes) {
		b := sizes[name]
		st.Records.Count++
		st.Records.TotalBytes += b
		if b > st.Records.LargestBytes {
			st.Records.LargestBytes, st.Records.Largest = b, name
		}
		if _, ok := a.byName[name]; !ok {
			st.Records.Ignored++
		}
	}
	return st
}

// assessment is every host of a decision judged: the hosts (those the
// decision reports, by name), each with its judgements and verdict, and the
// link matrix between them.
type assessment struct {
	j      *limits
	hosts  []*host
	byName map[string]*host
	links  *linkMatrix
}

// assess judges every host of in. A host's own entry is judged first, every
// host's; then each link is held against its other end as well (links.go),
// and the verdicts follow.
func assess(in Input) *assessment { return assessJudging(in, nil) }

// assessJudging is assess with decide's before.
func assessJudging(in Input, before func(node string)) *assessment {
	s := in.Settings
	now := in.Now.UTC()
	prev := map[string]*status.Observation{}
	if in.Previous != nil {
		for _, h := range in.Previous.Hosts {
			if h.Observation != nil {
				prev[h.Name] = h.Observation
			}
		}
	}
	nodes := slices.SortedFunc(slices.Values(in.Nodes), func(a, b k3snode.Node) int { return cmp.Compare(a.Name, b.Name) })

	j := limitsOf(s, now)
	j.read = entry.LimitsFor(max(s.Window, in.ReadWindow), s.MaxServers)
	j.unprotected = heldUnprotected(in)
	if in.Previous != nil {
		j.since = in.Previous.Memory.UnprotectedAt
	}
	var hosts []*host
	byName := map[string]*host{}
	for _, n := range nodes {
		if byName[n.Name] != nil {
			continue // a Node name is unique; a repeat adds nothing
		}
		h := &host{node: n}
		if !n.Voter && !n.Eligible {
			// Its host could not take a vote: its record, if any, is
			// counted with the records, never read (a node with the join
			// token could register many, each with a record at the cap).
			continue
		}
		if why, ok := in.Unreadable[n.Name]; ok {
			h.hasEntry, h.wasRead, h.readErr = true, true, errors.New(why)
		} else if raw, ok := in.Entries[n.Name]; ok {
			h.raw, h.hasEntry = raw, true
			h.obs = observe(prev[n.Name], raw, now)
			if n.Voter {
				// A labelled node's role depends on its entry (a learner);
				// every other entry is read only when its host is judged.
				h.read(s, j.read, &j.dec, true)
			}
		}
		h.role = roleOf(n, h.etcd)
		if h.role == status.RoleOther && !h.hasEntry {
			continue // a host that records nothing has nothing to report
		}
		hosts = append(hosts, h)
		byName[n.Name] = h
	}

	// A record that claims another member's etcd member ID is refused
	// before any member ID names a host (trust.go).
	refused := claimMembers(hosts, prev)
	var voters []string // every member the probes connect to
	members := map[string]string{}
	for _, h := range hosts {
		if h.isMember() {
			voters = append(voters, h.node.Name)
			if x := h.etcd; x != nil && x.memberID != "" {
				members[x.memberID] = h.node.Name
			}
		}
	}
	// One block for every host's judgements, each host given room for all
	// it can make (ownRoom); one that makes more grows out of it.
	room := 0
	for _, h := range hosts {
		room += h.ownRoom(len(voters))
	}
	block := make([]judgement, room)
	for _, h := range hosts {
		n := h.ownRoom(len(voters))
		h.own, block = block[:0:n], block[n:]
		if why, ok := refused[h]; ok {
			h.refuseRecord(why)
		} else {
			h.judge(j, now, voters, members, before)
		}
		sortJudgements(h.own)
	}
	links := linksOf(hosts, byName)
	for _, h := range hosts {
		h.judgements(links, byName)
		h.verdict = verdictOf(h.all)
	}
	return &assessment{j: j, hosts: hosts, byName: byName, links: links}
}

// decodeEntry reads one host's entry. A panic in the reader is that entry's
// error: the other hosts are still judged.
//
// The entry is read with dec: kept, into memory of its own and only the
// decoding's scratch from dec's; else into memory dec's next entry reuses.
func decodeEntry(dec *entry.Decoder, kept bool, raw, node string, l entry.Limits) (e entry.Entry, connects map[string]*entry.Connects, err error) {
	defer func() {
		if p := recover(); p != nil {
			e, connects, err = entry.Entry{}, nil, fmt.Errorf("reading the entry panicked: %s", status.Clip(fmt.Sprint(p)))
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
		err = fmt.Errorf("the entry names node %q but is stored under %q", status.Clip(e.Node), node)
	}
	return e, connects, err
}

// read decodes the host's entry with dec and takes its window. An etcd
// member's entry is read before any host is judged (its role depends on
// it), so it is kept, in memory of its own, until the member is judged;
// every other host reads its entry as it is judged, into the memory of the
// host judged before it.
func (h *host) read(s settings.Settings, read entry.Limits, dec *entry.Decoder, kept bool) {
	h.wasRead = true
	e, connects, err := decodeEntry(dec, kept, h.raw, h.node.Name, read)
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
	h.etcd = etcdStateOf(h.window)
	// A kept entry's histograms were read into dec's memory, which dec's
	// next entry reuses: merged now, the one use the decision has for them,
	// and dropped from its samples.
	if kept {
		h.merged = mergeEtcd(h.window)
		for i := range e.Samples {
			if x := e.Samples[i].Etcd; x != nil {
				x.WALFsync, x.BackendCommit, x.PeerRTT = quantile.Histogram{}, quantile.Histogram{}, nil
			}
		}
	}
}

// ownRoom is room for the judgements measure makes of the host's own entry:
// the evidence (samples, freshness), the link, a connect to each voter, the
// disk, memory and stall, and one of those made only now and then (a full
// record, failed readings); a member's etcd adds a round trip to each other
// member and its second disk, and it does not connect to itself. A host
// without a readable entry has one.
func (h *host) ownRoom(voters int) int {
	switch {
	case !h.hasEntry || h.readErr != nil:
		return 1
	case h.isMember():
		return 7 + 2*voters
	}
	return 8 + voters
}

// judge judges one host's own entry into h.own. A panic while judging it makes that
// host unknown with the panic's value as its reason, and leaves its samples
// out of the rest of the decision; the other hosts are judged as usual. The
// samples are let go once the host is judged: the plan reads judgements,
// and a fleet's decoded windows would otherwise all be held at once.
// before, when not nil, is called first (decide).
func (h *host) judge(j *limits, now time.Time, voters []string, members map[string]string, before func(node string)) {
	s := j.s
	defer func() {
		if p := recover(); p != nil {
			h.window, h.connects, h.decoded, h.judged, h.etcd = nil, nil, false, false, nil
			g := unmeasuredAs(kindEntry, vPanic, "", nil, unknown)
			g.text = status.Clip(fmt.Sprint(p))
			h.own = []judgement{g}
		}
		h.samples = len(h.window)
		h.window, h.connects, h.entry, h.merged = nil, nil, entry.Entry{}, nil
	}()
	if before != nil {
		before(h.node.Name)
	}
	if h.hasEntry && !h.wasRead {
		h.read(s, j.read, &j.dec, h.isMember())
	}
	if h.decoded && h.entry.Withheld != "" {
		// The probe writes no samples while the records are not
		// protected: its record says why and holds nothing to judge.
		h.withheld = true
		g := unmeasuredAs(kindRecord, vWithheld, "", nil, unknown)
		g.text = status.Clip(h.entry.Withheld)
		h.own = append(h.own, g)
		return
	}
	if j.unprotected[h.node.Name] {
		// Its marker was seen while the records were unprotected: the
		// samples its record holds now may be another probe's.
		g := unmeasuredAs(kindRecord, vUnprotected, "", nil, unknown)
		if !j.since.IsZero() {
			g.text = " since " + j.since.UTC().Format(time.RFC3339)
		}
		h.own = append(h.own, g)
		return
	}
	h.evidence(j, now, h.readErr)
	if h.decoded {
		h.measure(j, voters, members)
	}
}

// planSafely plans the swap; a panic while planning is a decision of none,
// with the panic as its reason, so that the verdicts are still published.
func planSafely(j *limits, hosts []*host, links *linkMatrix, prev *status.Status, mem *status.Memory) (d status.Decision) {
	defer func() {
		if p := recover(); p != nil {
			first := 0
			d = status.Decision{Action: status.ActionNone, Reasons: []status.Reason{step(status.CodePlanPanicked, "", panicBasis, false,
				"planning panicked: "+status.Clip(fmt.Sprint(p)))}, Deciding: &first}
		}
	}()
	return plan(j, hosts, links, prev, mem)
}

// observe carries when the controller first saw this exact entry, so that
// staleness never compares the probe's clock with the controller's.
func observe(prev *status.Observation, raw string, now time.Time) *status.Observation {
	o := &status.Observation{Digest: Digest(raw), ChangedAt: now}
	if prev != nil && prev.Digest == o.Digest && !prev.ChangedAt.IsZero() && !prev.ChangedAt.After(now) {
		o.ChangedAt = prev.ChangedAt.UTC()
	}
	return o
}

// votes reports a host that holds an etcd vote or is becoming one.
func votes(h *host) bool { return h.role == status.RoleVoter || h.role == status.RoleLearner }

// remember carries the voter set and when it last changed. A change seen
// between two decisions dates from the later one. With no previous decision
// (a controller's first), the set dates from the youngest of its voters' k3s
// EtcdIsVoter conditions when every voter has one, each counted back from
// now by its age at k3s's last heartbeat of it (k3snode.Node.VoterFor: k3s's
// clock against itself, never against this one); otherwise from now, which
// holds any swap back for a cooldown rather than guess that the set is old.
func remember(prev *status.Status, hosts []*host, now time.Time) status.Memory {
	m := status.Memory{Voters: []string{}, VotersChangedAt: now}
	if prev != nil && !prev.Memory.ConnectsSlowAt.After(now) {
		m.ConnectsSlowAt = prev.Memory.ConnectsSlowAt.UTC()
	}
	if prev != nil && !prev.Memory.MemberLateAt.After(now) {
		m.MemberLateAt, m.MemberLate = prev.Memory.MemberLateAt.UTC(), prev.Memory.MemberLate
	}
	youngest := time.Duration(math.MaxInt64)
	known := true
	for _, h := range hosts {
		if h.role != status.RoleVoter {
			continue
		}
		m.Voters = append(m.Voters, h.node.Name)
		if !h.node.VoterForKnown {
			known = false
		} else {
			youngest = min(youngest, h.node.VoterFor)
		}
	}
	if prev != nil && slices.Equal(prev.Memory.Voters, m.Voters) && !prev.Memory.VotersChangedAt.IsZero() && !prev.Memory.VotersChangedAt.After(now) {
		m.VotersChangedAt = prev.Memory.VotersChangedAt.UTC()
		return m
	}
	if prev == nil && known && len(m.Voters) > 0 {
		m.VotersChangedAt = now.Add(-youngest).UTC()
	}
	return m
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
