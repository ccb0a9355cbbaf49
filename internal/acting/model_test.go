package acting

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/fleet-role/fleet-role/internal/settings"
)

// model is k3s with embedded etcd, the actuators and the API server, as far
// as the executor sees them: a stand-in for the real k3s of test/k3s, so that
// every step boundary can be tried on a fake clock. Its rules are k3s
// v1.34.2's and etcd 3.6.5's as docs/acting.md cites them: a join is a
// learner, added only while the serving member reaches every voter; one
// learner at most; the leader promotes a caught-up learner at its 15 s tick;
// the member controller removes an annotated member if the started voters
// left keep quorum and drops the annotation if not; a server restarted with
// disable-etcd removes its own member; a removed member stays down until it
// is restarted.
type model struct {
	now   time.Time
	s     settings.Settings
	hosts map[string]*mhost
	order []string
	// members by host; leader is the host whose member leads.
	members map[string]*mmember
	leader  string
	nextID  int
	// lease is the Lease's term; the actuators refuse a command of an
	// older one.
	lease int32
	// journal as last written (the ConfigMap), and how often each
	// (plan, seq) was carried out.
	journal  *Journal
	executed map[string]int
	nextTick time.Time
	// refuseRemove makes the member controller refuse every removal, as
	// etcd's ErrMemberNotEnoughStarted does.
	refuseRemove bool
	// stuckLeader makes etcd's MoveLeader time out: leadership stays.
	stuckLeader bool
	// noStandby: the decision names x to replace but no fit standby, so
	// it publishes no swap (LeadOut, not Out and In).
	noStandby bool
	// what the observer saw
	maxLearners, maxMembers, minAliveMargin int
	everVoter                               map[string]bool
	log                                     []string
}

type mhost struct {
	name                        string
	server, joined, etcdOn      bool
	etcdLabel, nodeNamed, ready bool
	verdict                     string
	cut                         bool
	// peerCut: only its etcd peer traffic is cut. Its k3s still reaches
	// the voters' client port, so it joins (etcd adds its learner), but
	// its learner never catches up, so it is never promoted; its
	// actuator still works. Its k3s, whose etcd cannot bootstrap, exits
	// and is started again by its service manager, and each start with
	// no member of its own joins again (the step's join does).
	peerCut bool
	// joinedAt is when a peer-cut host's k3s joined: its etcd gives up
	// its bootstrap bootstrapGiveUp later and k3s exits.
	joinedAt   time.Time
	restartAt  time.Time
	removeAnn  bool
	removeReq  string
	report     *Report
	tombstoned bool
	// removed: k3s's member controller removed its member and wrote
	// removed-node-name (its etcd label stays until k3s restarts).
	removed bool
	// armed is the settle its actuator took up, waiting for its member
	// to leave etcd.
	armed *Command
	// apiDown: its voter member was removed from under it; its actuator
	// reaches no API server until k3s restarts there.
	apiDown bool
}

type mmember struct {
	id      string
	learner bool
	since   time.Time
}

const modelTick = 5 * time.Second

func modelSettings() settings.Settings {
	s := settings.Defaults()
	s.Acting, s.DryRun = settings.ActingGuided, false
	return s
}

// newModel is a formed fleet: voters a (the first server), b and x (x
// unfit), the standby s, a control-plane-only server; leader is the voter
// that leads.
func newModel(leader string) *model {
	m := &model{now: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC), s: modelSettings(), hosts: map[string]*mhost{},
		members: map[string]*mmember{}, executed: map[string]int{}, lease: 1, minAliveMargin: 99, everVoter: map[string]bool{}}
	for _, h := range []*mhost{
		{name: "a", server: true, etcdOn: true, verdict: "fit"},
		{name: "b", server: true, joined: true, etcdOn: true, verdict: "fit"},
		{name: "s", server: true, joined: true, verdict: "fit"},
		{name: "x", server: true, joined: true, etcdOn: true, verdict: "unfit"},
	} {
		h.ready = true
		m.hosts[h.name] = h
		m.order = append(m.order, h.name)
		if h.etcdOn {
			m.addMember(h.name, false)
			h.etcdLabel, h.nodeNamed = true, true
		}
	}
	m.leader = leader
	m.nextTick = m.now.Add(k3sManageTick)
	m.observe()
	return m
}

func (m *model) addMember(host string, learner bool) {
	m.nextID++
	m.members[host] = &mmember{id: fmt.Sprintf("%x", 0x1000+m.nextID), learner: learner, since: m.now}
	m.logf("member add %s learner=%v", host, learner)
}

func (m *model) removeMember(host string) {
	// A voter's k3s serves its API from its own member: removed from
	// under it, the host serves no API until k3s restarts there (a
	// learner's API server never served, test/acting saw the standby's
	// reach the API through the other servers').
	learner := m.members[host].learner
	m.hosts[host].apiDown = !learner
	delete(m.members, host)
	if m.leader == host {
		m.leader = m.longestVoter()
	}
	m.logf("member remove %s", host)
	if h := m.hosts[host]; h.peerCut && learner {
		// Its etcd never started: no tombstone. Its k3s, in its loop of
		// failed bootstraps and restarts, joins again at its next start
		// while its drop-in keeps etcd on: at the worst, at once, before
		// any controller reads the member list without it.
		h.joinedAt = time.Time{}
		if h.etcdOn && h.restartAt.IsZero() && h.server {
			m.join(h)
		}
		return
	}
	// A member removed while it runs stops its etcd and stays down until
	// k3s restarts (the tombstone).
	m.hosts[host].tombstoned = true
}

func (m *model) logf(f string, a ...any) {
	m.log = append(m.log, m.now.Format("15:04:05")+" "+fmt.Sprintf(f, a...))
}

func (m *model) voters() []string {
	var vs []string
	for h, mm := range m.members {
		if !mm.learner {
			vs = append(vs, h)
		}
	}
	sort.Strings(vs)
	return vs
}

func (m *model) longestVoter() string {
	for _, v := range m.voters() {
		if !m.hosts[v].cut {
			return v
		}
	}
	return ""
}

// connected: a member takes part (not cut off, not removed from under it).
func (m *model) connected(h string) bool {
	_, ok := m.members[h]
	return ok && !m.hosts[h].cut && !m.hosts[h].peerCut && !m.hosts[h].tombstoned
}

// step advances the model by one tick: the actuators read the journal and
// act, restarts complete, k3s promotes and removes.
func (m *model) step() {
	m.now = m.now.Add(modelTick)
	for _, name := range m.order {
		m.actuate(m.hosts[name])
	}
	for _, name := range m.order {
		h := m.hosts[name]
		if h.peerCut && h.etcdOn && h.restartAt.IsZero() && !h.joinedAt.IsZero() && m.now.Sub(h.joinedAt) >= bootstrapGiveUp {
			// Its etcd cannot fetch the cluster from its peers: k3s
			// exits, and systemd (Restart=always) starts it again
			// RestartSec later.
			h.joinedAt, h.restartAt = time.Time{}, m.now.Add(serviceRestartSec)
			m.logf("%s's etcd gave up its bootstrap: k3s exits, systemd starts it again", h.name)
		}
		if !h.restartAt.IsZero() && !m.now.Before(h.restartAt) {
			m.restarted(h)
		}
		if h.etcdOn && h.restartAt.IsZero() && m.members[name] == nil && !h.tombstoned && h.server {
			m.join(h)
		}
	}
	if !m.now.Before(m.nextTick) {
		m.nextTick = m.nextTick.Add(k3sManageTick)
		m.promote()
	}
	m.memberController()
	m.observe()
}

// join is k3s's pollJoin on a started server with etcd on and no member:
// etcd adds a learner only with none there and with the serving member
// connected to every voter.
func (m *model) join(h *mhost) {
	if h.cut {
		return
	}
	for _, mm := range m.members {
		if mm.learner {
			return
		}
	}
	for _, v := range m.voters() {
		if !m.connected(v) {
			return
		}
	}
	m.addMember(h.name, true)
	if h.peerCut {
		h.joinedAt = m.now
	}
}

// bootstrapGiveUp is how long after its join a learner whose peers it
// cannot reach takes to give up (etcd's bootstrap failed 18 s after it
// began in test/acting); serviceRestartSec is systemd's RestartSec in the
// k3s.service of k3s's install script.
const (
	bootstrapGiveUp   = 20 * time.Second
	serviceRestartSec = 5 * time.Second
)

// restarted completes a k3s restart: with etcd off, RemoveSelf and the
// metadata controller; with it on, a removed member's tombstone starts a
// fresh join.
func (m *model) restarted(h *mhost) {
	h.restartAt = time.Time{}
	h.ready = true
	if !h.etcdOn {
		if m.members[h.name] != nil {
			// RemoveSelf, through the etcd proxy, as it starts: its API
			// server serves from the others' members.
			m.removeMember(h.name)
		}
		h.apiDown = false
		h.etcdLabel, h.nodeNamed, h.tombstoned = false, false, false
		m.logf("restarted %s control-plane only", h.name)
		return
	}
	h.tombstoned, h.apiDown = false, false
	if h.peerCut {
		h.joinedAt = m.now // its bootstrap begins again, and fails again
	}
	m.logf("restarted %s with etcd", h.name)
}

// promote is the leader's tick: every connected learner that has caught up
// (one tick after its add) becomes a voter, and k3s labels and names its
// Node.
func (m *model) promote() {
	if m.leader == "" || !m.connected(m.leader) {
		return
	}
	for name, mm := range m.members {
		if mm.learner && m.connected(name) && m.now.Sub(mm.since) >= modelTick {
			mm.learner = false
			h := m.hosts[name]
			h.etcdLabel, h.nodeNamed, h.removed = true, true, false
			m.logf("promote %s", name)
		}
	}
}

// memberController is k3s's: a remove annotation on a member's Node removes
// it (moving leadership first) if the started voters left keep quorum, and
// is dropped if not.
func (m *model) memberController() {
	for _, name := range m.order {
		h := m.hosts[name]
		if !h.removeAnn || !h.etcdLabel {
			continue
		}
		if m.members[name] == nil {
			h.removeAnn, h.nodeNamed = false, false
			continue
		}
		started := 0
		for _, v := range m.voters() {
			if v != name {
				started++
			}
		}
		if m.refuseRemove || started < quorum(len(m.voters())-1) {
			h.removeAnn = false
			m.logf("remove of %s refused", name)
			continue
		}
		m.removeMember(name)
		h.removeAnn, h.nodeNamed, h.removed = false, false, true
	}
}

// actuate is one host's actuator reading the journal.
func (m *model) actuate(h *mhost) {
	if h.cut {
		return
	}
	if c := h.armed; c != nil {
		// An armed settle waits on the local member alone.
		if m.members[h.name] == nil {
			h.armed = nil
			m.executed[fmt.Sprintf("%s/%d", c.PlanID, c.Seq)]++
			m.logf("actuator %s: settle, its member gone", h.name)
			h.ready = false
			h.restartAt = m.now.Add(2 * modelTick)
			h.report = &Report{PlanID: c.PlanID, Seq: c.Seq, Term: c.Term, Done: true}
		}
		return
	}
	j := m.journal
	if h.apiDown || j == nil || j.Command == nil || j.Command.Host != h.name {
		return
	}
	c := j.Command
	key := fmt.Sprintf("%s/%d", c.PlanID, c.Seq)
	if h.report != nil && h.report.PlanID == c.PlanID && h.report.Seq == c.Seq && h.report.Done {
		return
	}
	if c.Term < m.lease {
		h.report = &Report{PlanID: c.PlanID, Seq: c.Seq, Term: c.Term, Refused: "stale term"}
		return
	}
	if c.Verb == VerbSettle {
		if r := h.report; r == nil || r.PlanID != c.PlanID || r.Seq != c.Seq || !(r.Armed || r.Done) {
			armed := *c
			h.armed = &armed
			h.report = &Report{PlanID: c.PlanID, Seq: c.Seq, Term: c.Term, Armed: true}
			m.logf("actuator %s: settle armed", h.name)
		}
		return
	}
	if m.executed[key] > 0 {
		// Carried out before its report was written: report it only.
		h.report = &Report{PlanID: c.PlanID, Seq: c.Seq, Term: c.Term, Done: true}
		return
	}
	m.executed[key]++
	m.logf("actuator %s: %s %s", h.name, c.Verb, c.Target)
	switch c.Verb {
	case VerbEtcdOn:
		h.etcdOn = true
	case VerbEtcdOff:
		h.etcdOn = false
	case VerbMoveLeader:
		if m.leader == h.name && m.stuckLeader {
			// etcd's MoveLeader times out: the actuator says so.
			h.report = &Report{PlanID: c.PlanID, Seq: c.Seq, Term: c.Term, Error: "etcdserver: request timed out, leader transfer took too long"}
			return
		}
		if m.leader == h.name && !m.stuckLeader {
			for name, mm := range m.members {
				if mm.id == c.Target && !mm.learner {
					m.leader = name
				}
			}
		}
	case VerbRemoveMember:
		for name := range m.members {
			if m.hosts[name].name == j.In.Node && c.Target == j.In.PeerURL {
				m.removeMember(name)
			}
		}
	}
	if c.Restart {
		h.ready = false
		h.restartAt = m.now.Add(2 * modelTick)
	}
	h.report = &Report{PlanID: c.PlanID, Seq: c.Seq, Term: c.Term, Done: true}
}

// observe is the independent observer: learners, members and the margin of
// connected voters over quorum.
func (m *model) observe() {
	learners := 0
	for _, mm := range m.members {
		if mm.learner {
			learners++
		}
	}
	vs := m.voters()
	alive := 0
	for _, v := range vs {
		m.everVoter[v] = true
		if m.connected(v) {
			alive++
		}
	}
	m.maxLearners = max(m.maxLearners, learners)
	m.maxMembers = max(m.maxMembers, len(m.members))
	m.minAliveMargin = min(m.minAliveMargin, alive-quorum(len(vs)))
}

// world is what the controller would read: records, Nodes and reports, as
// k3s shows them (test/acting saw it): a member's Node is labelled etcd
// only once it is promoted, so a learner shows on no Node, and is seen only
// in the member count etcd's voters know; a removed member's Node keeps
// its label, with removed-node-name, until k3s restarts there.
func (m *model) world() World {
	w := World{Now: m.now, Settings: m.s, Out: "x", In: "s", SteadySince: m.now.Add(-time.Hour), Approved: PlanID("x", m.memberID("x"), "s")}
	if m.noStandby {
		w.Out, w.In, w.LeadOut, w.Approved = "", "", "x", LeadPlanID("x", m.memberID("x"))
	}
	for _, name := range m.order {
		h := m.hosts[name]
		host := Host{Name: name, Verdict: h.verdict, Server: h.server, EtcdLabel: h.etcdLabel, Ready: h.ready && !h.cut,
			RemoveAnnotation: h.removeAnn, RemoveRequested: h.removeReq, NodeNamed: h.nodeNamed, Joined: h.joined,
			PeerURL: "https://" + name + ":2380"}
		if h.report != nil && !h.cut {
			r := *h.report
			host.Report = &r
		}
		host.Voter, host.Removed = h.etcdLabel && !h.removed, h.removed
		if mm := m.members[name]; mm != nil && host.Voter {
			host.MemberID = mm.id
			host.Leader = m.leader == name
			host.Alive = m.connected(name) && m.leader != ""
			if host.Alive {
				w.EtcdMembers = len(m.members)
			}
		}
		w.Hosts = append(w.Hosts, host)
	}
	return w
}

func (m *model) memberID(h string) string {
	if mm := m.members[h]; mm != nil {
		return mm.id
	}
	return ""
}

// kill says where the controller dies in a round: before it writes the
// journal, or after the journal and before the Node.
type kill int

const (
	killNone kill = iota
	killBeforeJournal
	killBeforeNode
)

// round is one round of the controller over the model; it reports whether
// the round wrote anything.
func (m *model) round(mode string, k kill) bool {
	out := Next(m.journal, m.world(), mode, m.lease)
	wrote := out.Journal != nil || out.Annotate != ""
	if k == killBeforeJournal {
		return wrote
	}
	if out.Journal != nil {
		m.journal = out.Journal
	}
	if k == killBeforeNode {
		return wrote
	}
	if out.Annotate != "" {
		h := m.hosts[out.Annotate]
		h.removeAnn, h.removeReq = true, m.journal.PlanID
	}
	return wrote
}

// historyOK: no step ran again after it was done.
func historyOK(j *Journal) error {
	done := map[string]bool{}
	for _, e := range j.History {
		if done[e.Step] && slices.Contains(Steps, StepName(e.Step)) {
			return fmt.Errorf("step %s went to %s after it was done", e.Step, e.State)
		}
		if e.State == string(StateDone) {
			done[e.Step] = true
		}
	}
	return nil
}
