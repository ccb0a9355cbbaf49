package decide_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/internal/decide"
	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/quantile"
	"github.com/fleet-role/fleet-role/internal/status"
)

// Crafted records: what a compromised host may write into its own record
// (the admission policy keeps it out of every other). Each changes the
// generated honest entry of the liar (gHost.lie).

// claimConnect makes every sample claim a connect of secs to voter.
func claimConnect(voter string, secs float64) func(*entry.Entry) {
	return func(e *entry.Entry) {
		for i := range e.Samples {
			if e.Samples[i].Connect == nil {
				e.Samples[i].Connect = map[string]entry.Connect{}
			}
			e.Samples[i].Connect[voter] = entry.Connect{Seconds: secs}
		}
	}
}

// claimConnectOver makes the last k samples claim a connect of secs to
// voter, the others as measured.
func claimConnectOver(voter string, k int, secs float64) func(*entry.Entry) {
	return func(e *entry.Entry) {
		for i := max(0, len(e.Samples)-k); i < len(e.Samples); i++ {
			if e.Samples[i].Connect == nil {
				e.Samples[i].Connect = map[string]entry.Connect{}
			}
			e.Samples[i].Connect[voter] = entry.Connect{Seconds: secs}
		}
	}
}

// claimMember makes every etcd sample report id as its member ID.
func claimMember(id string) func(*entry.Entry) {
	return func(e *entry.Entry) {
		for i := range e.Samples {
			if x := e.Samples[i].Etcd; x != nil {
				x.MemberID = id
			}
		}
	}
}

// claimRTT makes every etcd sample but the first observe one round trip of
// secs to member id.
func claimRTT(id string, secs float64) func(*entry.Entry) {
	return func(e *entry.Entry) {
		for i := range e.Samples {
			x := e.Samples[i].Etcd
			if x == nil {
				continue
			}
			if x.PeerRTT == nil {
				x.PeerRTT = map[string]quantile.Histogram{}
			}
			obs := map[int]uint64{}
			if i > 0 {
				obs[bucket(rttBounds, secs)] = 1
			}
			x.PeerRTT[id] = hist(rttBounds, obs)
		}
	}
}

// claimEtcd changes every etcd sample.
func claimEtcd(edit func(x *entry.EtcdSample)) func(*entry.Entry) {
	return func(e *entry.Entry) {
		for i := range e.Samples {
			if x := e.Samples[i].Etcd; x != nil {
				edit(x)
			}
		}
	}
}

func lies(edits ...func(*entry.Entry)) func(*entry.Entry) {
	return func(e *entry.Entry) {
		for _, edit := range edits {
			edit(e)
		}
	}
}

// wantNotNamed fails when any of names is named to leave: the decision's
// out, or the subject of a replace step that lets the swap go on.
func wantNotNamed(t *testing.T, st status.Status, names ...string) {
	t.Helper()
	if slices.Contains(names, st.Decision.Out) {
		t.Fatalf("%s named to leave: %+v", st.Decision.Out, st.Decision)
	}
	for _, r := range st.Decision.Reasons {
		if r.Signal == status.StepReplace && r.OK && slices.Contains(names, r.Subject) {
			t.Fatalf("%s named to leave: %s", r.Subject, r.Detail)
		}
	}
}

// The attack: a compromised voter claims slow connects to a
// healthy voter whose name sorts before its own. Before, both explained
// the one slow link, tied on every measure, and the name named the healthy
// one. Now the healthy voter's slow link rests on the liar's record alone:
// it is not named; the liar, whose own record says its link is slow, is.
func TestOneRecordCannotNameAnother(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			f := votersFleet(t, n)
			liar := f.hosts[n-1]
			liar.lie = claimConnect("alpha", 0.6)
			st := decideSteady(f.input(t, settled(f, 2*time.Hour)))
			wantVerdict(t, st, "alpha", status.Unfit) // the link it measures: its verdict is the liar's to change
			wantSwap(t, st, liar.name, "standby-1")
			r := decisionReason(t, st, status.StepReplace, liar.name)
			if !strings.Contains(r.Detail, "not named, since one record speaks only for its own host: alpha's slow links rest on "+liar.name+"'s record alone") {
				t.Fatalf("replace: %s", r.Detail)
			}

			// Pinned, the liar keeps its place and nothing is swapped;
			// alpha is still not named (before, an unpinned voter went first).
			liar.pinned = yes()
			st = decideSteady(f.input(t, settled(f, 2*time.Hour)))
			wantNone(t, st, status.StepPinned)
			wantNotNamed(t, st, "alpha")
		})
	}
}

// A voter the liar accuses alone may not be named even where the liar is
// not among the voters that explain the slow links: honest noise on the
// link outside the liar's set (one sample over at each end, which the tail
// forgives each end but not the two together) leaves only the accused's
// set explained. Before, that named the accused.
func TestAccusedAloneIsNeverNamed(t *testing.T) {
	f := standardFleet(k3s())
	residue := func(i, n int) float64 {
		if i == n-4 {
			return 0.3
		}
		return 0
	}
	f.host("alpha").stall = residue
	f.host("bravo").stall = residue
	// charlie lies: slow to alpha, perfectly fit to bravo.
	f.host("charlie").lie = lies(claimConnect("alpha", 0.6), claimConnect("bravo", 0.0001))
	st := decideSteady(f.input(t, settled(f, 2*time.Hour)))
	wantNotNamed(t, st, "alpha", "bravo")
	if r := decisionReason(t, st, status.StepAttribution, ""); !r.OK || !strings.Contains(r.Detail, "they explain the slow links: alpha") {
		t.Fatalf("attribution (the case this test is about: alpha's set alone explained): %+v", r)
	}
	wantNone(t, st, status.StepReplace)
}

// Two voting hosts that each measured a link to the same voter slow
// implicate it whichever of them lies; one does not. A voter starved of CPU
// shows that way in etcd's round trips to it, which it does not measure
// slow itself.
func TestTwoAccusersName(t *testing.T) {
	f := standardFleet(k3s())
	f.rttOnly = map[[2]string]float64{}
	f.host("alpha").pinned = yes()
	// alpha and bravo measure their round trips to charlie slow; charlie
	// measures them fit.
	f.host("alpha").lie = claimRTT(memberID("charlie"), 0.6)
	f.host("bravo").lie = claimRTT(memberID("charlie"), 0.6)
	st := decideSteady(f.input(t, settled(f, 2*time.Hour)))
	wantSwap(t, st, "charlie", "delta")

	// One of them alone: charlie is not named, nor is anyone else.
	f.host("bravo").lie = nil
	st = decideSteady(f.input(t, settled(f, 2*time.Hour)))
	wantNotNamed(t, st, "charlie")
}

// An honest host whose own measurements are slow (a host starved of CPU
// times every connect it makes late) is on slow links it alone made slow,
// and it is the one named: its own record implicates it.
func TestHonestOneSidedNamesItsWriter(t *testing.T) {
	f := votersFleet(t, 5)
	f.host("delta").connect = 0.4
	st := decideSteady(f.input(t, settled(f, 2*time.Hour)))
	wantSwap(t, st, "delta", "standby-1")

	// On as many slow links as a voter implicated by its own disk, the one
	// whose measurement alone made its link slow goes first, ahead of the
	// unpinned one: delta alone measured delta-bravo slow.
	f = votersFleet(t, 5)
	f.host("delta").lie = claimConnect("bravo", 0.6)
	f.host("delta").pinned = yes()
	f.host("bravo").slowWAL = true
	st = decideSteady(f.input(t, settled(f, 2*time.Hour)))
	if r := decisionReason(t, st, status.StepReplace, "delta"); !r.OK || !strings.Contains(r.Detail, "the one whose measurement alone made the most of them slow (1: bravo measured its link fit)") {
		t.Fatalf("replace: %+v", r)
	}
	wantNone(t, st, status.StepPinned)
}

// A link measured slow at one end and not measured at all at the other
// (etcd feeds its round trips rarely: one end's window may hold a slow one
// while the other's holds none) tells neither end: neither is named. Seen in
// the fault campaign after a delayed voter recovered: the peer whose window
// still held a slow round trip to it would otherwise have been named.
func TestUnseenLinkNamesNeitherEnd(t *testing.T) {
	f := standardFleet(k3s())
	f.host("alpha").lie = claimRTT(memberID("charlie"), 0.6)
	f.host("charlie").lie = func(e *entry.Entry) {
		for i := range e.Samples {
			if x := e.Samples[i].Etcd; x != nil {
				delete(x.PeerRTT, memberID("alpha"))
			}
		}
	}
	st := decideSteady(f.input(t, settled(f, 2*time.Hour)))
	wantNotNamed(t, st, "alpha", "charlie")
	wantNone(t, st, status.StepReplace)
	r := decisionReason(t, st, status.StepReplace, "")
	if !strings.Contains(r.Detail, "alpha measured its link to charlie slow and charlie measured nothing of it: which end is slow cannot be told") ||
		!strings.Contains(r.Detail, "charlie's slow links rest on alpha's record alone") {
		t.Fatalf("replace: %s", r.Detail)
	}
}

// Two voters tied on every measure the rule has, neither etcd's leader,
// with no Node metadata to tell them apart, are not told apart by their
// names: nothing is swapped. (With Nodes as the API server makes them, the
// tie is broken: tie_test.go.)
func TestTieIsNotBrokenByName(t *testing.T) {
	f := standardFleet(k3s())
	f.leader = "charlie"
	f.host("alpha").lie = claimConnect("bravo", 0.6)
	f.host("bravo").lie = claimConnect("alpha", 0.6)
	in := f.input(t, settled(f, 2*time.Hour))
	for i := range in.Nodes {
		in.Nodes[i].UID = ""
	}
	st := decideSteady(in)
	wantNone(t, st, status.StepReplace)
	r := decisionReason(t, st, status.StepReplace, "")
	if !strings.Contains(r.Detail, "alpha, bravo are tied") || !strings.Contains(r.Detail, "nothing tells them apart but their names") {
		t.Fatalf("replace: %+v", r)
	}
	// Any measure tells them apart: a margin.
	f.host("bravo").lie = claimConnect("alpha", 0.7)
	st = decideSteady(f.input(t, settled(f, 2*time.Hour)))
	wantSwap(t, st, "bravo", "delta")
}

// A record that reports another member's etcd member ID is refused: with
// memory, the record that held it keeps it and its host is judged as ever;
// without (a first decision), every record that reports it is refused,
// and nothing is swapped on it.
func TestDuplicateMemberRefused(t *testing.T) {
	f := standardFleet(k3s())
	f.host("charlie").slowWAL = true
	first := decide.Decide(f.input(t, settled(f, 2*time.Hour)))
	if o := hostOf(t, first, "alpha").Observation; o == nil || o.MemberID != memberID("alpha") {
		t.Fatalf("alpha's observation: %+v, want member ID %s", o, memberID("alpha"))
	}
	// bravo now claims alpha's member ID, and slow round trips from it to
	// bravo's own (so that the round trips to bravo's member would be put
	// on alpha).
	f.host("bravo").lie = lies(claimMember(memberID("alpha")), claimRTT(memberID("charlie"), 0.6))
	prev := first
	prev.Memory = settled(f, 2*time.Hour).Memory
	st := decide.Decide(f.input(t, &prev))
	wantVerdict(t, st, "alpha", status.Fit)
	wantVerdict(t, st, "bravo", status.Unknown)
	r := hostOf(t, st, "bravo").Reasons[0]
	if r.Signal != status.SignalRecord || r.OK || !strings.Contains(r.Detail, "its etcd member ID "+memberID("alpha")+" is already reported by alpha's record, which held it at the previous decision") {
		t.Fatalf("bravo's first reason: %+v", r)
	}
	wantNone(t, st, status.GateReported)
	wantNotNamed(t, st, "alpha")

	// No memory: both are refused.
	st = decide.Decide(f.input(t, settled(f, 2*time.Hour)))
	for _, n := range []string{"alpha", "bravo"} {
		wantVerdict(t, st, n, status.Unknown)
		if r := hostOf(t, st, n).Reasons[0]; !strings.Contains(r.Detail, "no record held it at the previous decision") {
			t.Fatalf("%s's first reason: %+v", n, r)
		}
	}
	wantNotNamed(t, st, "alpha")
}

// A record that hides its own member ID (reports another, unknown one)
// leaves the others' round trips to its real member with no host: they
// read unfit by round trips to a member no record claims, and none of them
// is named for it.
func TestHiddenMemberNamesNoOther(t *testing.T) {
	f := standardFleet(k3s())
	f.rttOnly = map[[2]string]float64{pairOf("charlie", "alpha"): 0.3, pairOf("charlie", "bravo"): 0.3}
	f.host("charlie").lie = lies(claimMember("1234abcd"), claimRTT(memberID("alpha"), 0.0005), claimRTT(memberID("bravo"), 0.0005))
	st := decideSteady(f.input(t, settled(f, 2*time.Hour)))
	wantVerdict(t, st, "alpha", status.Unfit)
	wantNotNamed(t, st, "alpha", "bravo")
	r := decisionReason(t, st, status.StepReplace, "")
	if !strings.Contains(r.Detail, "unfit only by round trips to etcd members that no record claims") {
		t.Fatalf("replace: %+v", r)
	}
	// Honest, charlie is named.
	f.host("charlie").lie = nil
	st = decideSteady(f.input(t, settled(f, 2*time.Hour)))
	wantSwap(t, st, "charlie", "delta")
}

// The rule's property, over random fleets: whatever one host writes into its
// own record, the voter named to leave is that host, or one the truth of
// the others implicates (a fault of its own, or a slow path it is on, which
// its own honest record then shows), or none.
func TestNoRecordNamesAnother(t *testing.T) {
	cases := 400
	if testing.Short() {
		cases = 60
	}
	for c := range cases {
		rng := rand.New(rand.NewPCG(uint64(c), 21))
		n := []int{3, 5}[rng.IntN(2)]
		f := votersFleet(t, n)
		f.rttOnly = map[[2]string]float64{}
		liar := f.hosts[rng.IntN(len(f.hosts))]
		allowed := map[string]bool{liar.name: true}
		for _, h := range f.hosts {
			if h == liar {
				continue
			}
			switch rng.IntN(12) {
			case 0:
				h.slowWAL = true
			case 1:
				h.lowMem = true
			case 2:
				h.connect = 0.3
			case 3:
				h.wifi = true
			case 4:
				o := f.hosts[rng.IntN(len(f.hosts))]
				if o != h {
					f.slow[pairOf(h.name, o.name)] = 0.3
					allowed[o.name] = true
				} else {
					continue
				}
			case 5:
				o := f.hosts[rng.IntN(n)]
				if o != h && h.voter {
					f.rttOnly[pairOf(h.name, o.name)] = 0.3
					allowed[o.name] = true
				} else {
					continue
				}
			case 6, 7:
				// One sample over, which the tail forgives each end: the
				// residue the liar may try to play on. Not a fault.
				k := n - 4 - rng.IntN(3)
				h.stall = func(i, _ int) float64 {
					if i == k+90 {
						return 0.3
					}
					return 0
				}
				continue
			default:
				continue
			}
			allowed[h.name] = true
		}
		liar.lie = randomLie(rng, f, liar)
		var named []string
		in := f.input(t, settled(f, 2*time.Hour))
		// As the controller decides: the first decision, then the same
		// records a period on (the swap published at the second).
		st := decide.Decide(in)
		for d := range 3 {
			for _, r := range st.Decision.Reasons {
				if r.Signal == status.StepReplace && r.OK && r.Subject != "" {
					named = append(named, r.Subject)
				}
			}
			if st.Decision.Out != "" {
				named = append(named, st.Decision.Out)
			}
			if d == 2 {
				break
			}
			in.Previous, in.Now = everyRecordChanged(st), in.Now.Add(in.Settings.SamplePeriod)
			st = decide.Decide(in)
		}
		for _, x := range named {
			if !allowed[x] {
				t.Errorf("case %d (%d voters): %s's crafted record got %s named to leave, which the others' records do not implicate (implicated: %v)\ndecision: %+v",
					c, n, liar.name, x, allowed, st.Decision.Reasons)
				break
			}
		}
	}
}

// randomLie is a crafted record: for each voter, a slow, perfectly fit or
// borderline connect, and etcd round trips; a member ID of its own, of
// another, of no one, or none; its own readings; its etcd's view.
func randomLie(rng *rand.Rand, f *gFleet, liar *gHost) func(*entry.Entry) {
	var edits []func(*entry.Entry)
	members := f.members()
	for _, v := range members {
		if v == liar {
			continue
		}
		switch rng.IntN(5) {
		case 0:
			edits = append(edits, claimConnect(v.name, 0.26+rng.Float64()))
		case 1:
			edits = append(edits, claimConnect(v.name, 0.0001))
		case 2:
			edits = append(edits, claimConnectOver(v.name, rng.IntN(4), 0.3))
		}
		switch rng.IntN(4) {
		case 0:
			edits = append(edits, claimRTT(memberID(v.name), 0.6))
		case 1:
			edits = append(edits, claimRTT(memberID(v.name), 0.0002))
		}
	}
	switch rng.IntN(6) {
	case 0:
		edits = append(edits, claimMember(memberID(members[rng.IntN(len(members))].name)))
	case 1:
		edits = append(edits, claimMember(strconv.FormatUint(rng.Uint64()>>1, 16)))
	case 2:
		edits = append(edits, claimMember(""))
	}
	if rng.IntN(5) == 0 {
		edits = append(edits, claimRTT(strconv.FormatUint(rng.Uint64()>>1, 16), 0.6))
	}
	if rng.IntN(6) == 0 {
		edits = append(edits, claimEtcd(func(x *entry.EtcdSample) {
			x.WALFsync = hist(walBounds, map[int]uint64{5: 100})
		}))
	}
	if rng.IntN(8) == 0 {
		edits = append(edits, claimEtcd(func(x *entry.EtcdSample) { x.HasLeader = false }))
	}
	if rng.IntN(8) == 0 {
		edits = append(edits, func(e *entry.Entry) {
			for i := range e.Samples {
				e.Samples[i].MemAvailableBytes = gib / 2
			}
		})
	}
	rng.Shuffle(len(edits), func(i, j int) { edits[i], edits[j] = edits[j], edits[i] })
	return lies(edits...)
}
