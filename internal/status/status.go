package status

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/fleet-role/fleet-role/internal/acting"
	"github.com/fleet-role/fleet-role/internal/settings"
)

// Schema names the status document's version (the "schema" field).
const Schema = "fleet-role.io/status/v1"

// StatusKey is the status document's key in the fleet-role-status ConfigMap.
const StatusKey = "status.json"

// Role is what a host is to etcd.
type Role string

// Roles.
const (
	RoleVoter   Role = "voter"   // node-role.kubernetes.io/etcd=true, not a learner
	RoleLearner Role = "learner" // an etcd member that does not vote yet
	RoleStandby Role = "standby" // a non-voter marked eligible
	RoleOther   Role = "other"   // neither
)

// Verdict is a host's fitness to hold an etcd vote.
type Verdict string

// Verdicts.
const (
	Fit     Verdict = "fit"
	Unfit   Verdict = "unfit"
	Unknown Verdict = "unknown" // too few samples, a stale or unreadable entry
)

// Actions of a decision. Nothing ever acts on either: dry-run is the only
// mode.
const (
	ActionSwap = "swap"
	ActionNone = "none"
)

// Status is the whole decision, exactly as the status document holds it.
type Status struct {
	Schema string `json:"schema"`
	// Form is which form of the document this is: FormFull, or the form
	// Marshal reduced it to so that it fits one ConfigMap (fit.go), and
	// Dropped what that form left out of the full decision.
	Form        string    `json:"form"`
	Dropped     []Dropped `json:"dropped,omitempty"`
	GeneratedAt time.Time `json:"generated_at"`
	DryRun      bool      `json:"dry_run"`
	Settings    Settings  `json:"settings"`
	Hosts       []Host    `json:"hosts"`
	Decision    Decision  `json:"decision"`
	// FailureTolerance is how many more voters may fail before etcd loses
	// quorum (tolerance.go). It is counted over every host, so that it
	// stands in every form, also one that leaves hosts out.
	FailureTolerance FailureTolerance `json:"failure_tolerance"`
	// Links is the link matrix: what each host measured of its paths to
	// the etcd members (LinkRow). Decide gives a row for every host that
	// measured one; a reduced form may leave rows out (fit.go).
	Links []LinkRow `json:"links"`
	// Timing is the etcd timing the voters' readings call for, beside the
	// cluster's (timing.go).
	Timing  Timing  `json:"timing"`
	Memory  Memory  `json:"memory"`
	Records Records `json:"records"`
	// Texts is the document's table of texts that several reasons repeat,
	// which those reasons name by BasisRef and DetailRef. Only a document
	// that would not fit otherwise has one; Decide and UnmarshalStatus give a
	// Status without it, every reason holding its own texts.
	Texts []string `json:"texts,omitempty"`
	// Acting is what acting makes of the decision: the mode, the published
	// swap's step table and the swap under way (internal/acting); nil with
	// acting off, so that the document is then what it was before acting
	// existed.
	Acting *acting.Status `json:"acting,omitempty"`
	// Writer is the controller that published the document, the holder of
	// the Lease; nil where no election chose one (fleet-role decide, the
	// demo). Decide leaves it nil: the controller sets it.
	Writer *Writer `json:"writer,omitempty"`
	// History is the verdicts of the writer's last decisions, this one the
	// newest, so that its status page's history survives a restart and a
	// failover (history.go). Decide leaves it nil: the controller sets it.
	// Only the full form carries it.
	History *History `json:"history,omitempty"`
}

// Writer names the controller that wrote a status: the identity it holds
// the Lease by, the Lease, and its term there.
type Writer struct {
	Identity string `json:"identity"`
	// Lease is the Lease it holds, namespace/name.
	Lease string `json:"lease"`
	// Term is the Lease's transitions when it acquired it: each new holder
	// raises it, so a status of an earlier term written after one of a
	// later term was written by a deposed leader.
	Term int32 `json:"term"`
	// Since is when it acquired the Lease, by its own clock.
	Since time.Time `json:"since"`
	// Version is the writer's fleet-role version (internal/version): in a
	// rollout that mixes two versions it says which one decided.
	Version string `json:"version,omitempty"`
}

// VersionOrEmpty is the writer's version, or "" for no writer.
func (w *Writer) VersionOrEmpty() string {
	if w == nil {
		return ""
	}
	return w.Version
}

// Records is what the probes' records hold in all: how many, their entries'
// bytes in total and the largest, against the cap each record is held to
// (docs/records.md, Capacity).
type Records struct {
	Count        int    `json:"count"`
	TotalBytes   int    `json:"total_bytes"`
	LargestBytes int    `json:"largest_bytes"`
	Largest      string `json:"largest,omitempty"`
	CapBytes     int    `json:"cap_bytes"`
	// Ignored counts the records, among Count, of nodes that are neither
	// voters nor eligible (or no Node at all): counted, never read, since
	// their hosts could not take a vote (docs/records.md, Bounded cost).
	Ignored int `json:"ignored,omitempty"`
}

// Settings is the settings the decision used and every limit derived from
// them, with its derivation.
type Settings struct {
	Values settings.Settings `json:"values"`
	Limits []settings.Limit  `json:"limits"`
	// Source is where the values came from while the controller follows
	// the settings ConfigMap: the version in force and, while a later one
	// is refused, why (internal/livesettings). Decide leaves it nil: the
	// controller sets it.
	Source *settings.Source `json:"source,omitempty"`
}

// Host is one host's verdict and the reasons for it.
type Host struct {
	Name     string  `json:"name"`
	Role     Role    `json:"role"`
	Eligible bool    `json:"eligible"`
	Pinned   bool    `json:"pinned"`
	Verdict  Verdict `json:"verdict"`
	Samples  int     `json:"samples"`
	// RecordBytes is the size of the host's entry as its record holds it.
	RecordBytes int      `json:"record_bytes,omitempty"`
	Reasons     []Reason `json:"reasons"`
	// Deciding is the index in Reasons of the reason that decides the
	// verdict (DecidingReason); nil when this form of the document keeps
	// none of the host's reasons.
	Deciding *int `json:"deciding,omitempty"`
	// UnfitByLinksTo, for an unfit voter the attribution does not
	// implicate, names the implicated voters whose links alone make it
	// unfit: every reading of its own that fails is a link to one of them
	// (Decision.Implicated). Its vote is sound; the slowness is theirs.
	UnfitByLinksTo []string `json:"unfit_by_links_to,omitempty"`
	// Observation is when the controller last saw the host's entry change;
	// nil when the host has no entry.
	Observation *Observation `json:"observation,omitempty"`
	// Member is what the host's etcd member said of itself at the latest
	// sample of its window, as far as the decision trusted the record to
	// speak for it; nil for none. It is not in the document: acting reads
	// it from the decision it was made with.
	Member *Member `json:"-"`
}

// Member is one etcd member's own word on itself (its metrics).
type Member struct {
	ID                         string
	Leader, Learner, HasLeader bool
	// NoSpace: its database is at its quota, where etcd raises NOSPACE.
	NoSpace bool
	// KnownMembers is how many members the cluster has as this member
	// knows them, itself included (etcd_network_known_peers): on k3s a
	// learner's Node carries no etcd label until it is promoted, so a
	// voter's own count is how a learner is seen at all.
	KnownMembers int
}

// Observation lets the next decision judge staleness by the controller's
// own clock: the digest of the raw entry and when it was first seen so.
type Observation struct {
	Digest    string    `json:"digest"`
	ChangedAt time.Time `json:"changed_at"`
	// MemberID is the etcd member ID the host's record was taken to speak
	// for, so that the next decision knows which record already reported
	// it (docs/limits.md, "One record speaks only for its own host").
	MemberID string `json:"member_id,omitempty"`
}

// Reason is one judgement with its numbers: the measured value against the
// limit, in unit, by rule, resting on basis. Value and Limit are null where
// there is no number (a failed connect, a link class); Detail then says what
// there is.
type Reason struct {
	Signal string `json:"signal"`
	// Code is why the reason came out as it did, stable across releases
	// (codes.go); Detail says it in words.
	Code    Code          `json:"code,omitempty"`
	Subject string        `json:"subject,omitempty"`
	Value   *float64      `json:"value"`
	Limit   *float64      `json:"limit"`
	Unit    string        `json:"unit,omitempty"`
	Rule    settings.Rule `json:"rule,omitempty"`
	Basis   string        `json:"basis,omitempty"`
	OK      bool          `json:"ok"`
	Detail  string        `json:"detail,omitempty"`
	// BasisRef and DetailRef are set only in a document with Texts: the
	// index in Texts of the basis or detail, written there once.
	BasisRef  *int `json:"basis_ref,omitempty"`
	DetailRef *int `json:"detail_ref,omitempty"`

	// Since is set on a reason that states an age (the decision's time
	// less Since), which grows with every decision: its Value, where it has
	// one, is that age, and its Detail says it. The fingerprint compares
	// Since in their place (fingerprint.go). It is not in the document:
	// the time itself is there already, in the memory or the host's
	// observation, and a reason read back has none.
	Since time.Time `json:"-"`
}

// Decision is the swap that would be made, or none and why.
type Decision struct {
	Action string `json:"action"`
	// Out and In are set only when Action is swap.
	Out     string   `json:"out,omitempty"`
	In      string   `json:"in,omitempty"`
	Reasons []Reason `json:"reasons"`
	// Deciding is the index in Reasons of the step that decides the
	// action (DecidingStep): for a swap, the replace step, which names the
	// voter taken out and why; otherwise the first step that holds the
	// swap back. Nil when this form keeps none of the decision's reasons.
	Deciding *int `json:"deciding,omitempty"`
	// Implicated are the voters the attribution rule implicates, sorted:
	// the voters of the smallest sets that explain the slow links between
	// voters (attribution.go). Empty when no link between voters is slow,
	// or the rule did not run or attributed them to no voter.
	Implicated []string `json:"implicated,omitempty"`
}

// LinkRow is what one host (From) measured over its window of its paths to
// the etcd members, a cell per member, by name (docs/status.md, "links").
// It carries no text from the entry but node names, so its size is bounded
// by the fleet's, not by what the records hold.
type LinkRow struct {
	From string     `json:"from"`
	To   []LinkCell `json:"to"`
}

// LinkCell is one link as its measuring host measured it.
type LinkCell struct {
	Peer string `json:"peer"`
	// Connect is the tail of the TCP connects to Peer's etcd peer port;
	// nil when the host does not connect to it.
	Connect *LinkReading `json:"connect,omitempty"`
	// RTT is the tail of etcd's own round trip to Peer, which only an etcd
	// member measures; nil when its etcd observed none.
	RTT *LinkReading `json:"rtt,omitempty"`
	// Slow: either reading is over its limit (the host's connect or
	// peer_rtt reason about Peer is not ok). It counts against Peer as
	// well when the measuring host was judged on a full, fresh window.
	Slow bool `json:"slow"`
}

// LinkReading is one tail of a link's window against its limit (the
// settings' connect or peer_rtt limit).
type LinkReading struct {
	// Seconds is the tail; nil when there is none: the connects at the
	// tail failed (Failed says how many), none was made in the window
	// (Count 0), or etcd's histograms could not be merged (Unmerged).
	Seconds *float64 `json:"seconds"`
	// Count is how many connects or round trips the tail is of.
	Count int `json:"count"`
	// Over counts the connects over the limit or failed; Failed those that
	// failed. A round trip has neither, as etcd keeps only its histogram.
	Over   int `json:"over,omitempty"`
	Failed int `json:"failed,omitempty"`
	// Unmerged counts the window's histograms that could not be merged:
	// the round trip is then not judged (not OK, and not slow).
	Unmerged int `json:"unmerged,omitempty"`
	// OK: within its limit (or nothing to judge, Count 0).
	OK bool `json:"ok"`
}

// Memory is what the next decision needs from this one: the voter set and
// when it last changed, for the cooldown; the voter a swap names to leave and
// at how many consecutive decisions, for the hysteresis; and the running
// counts of flaps and verdict changes.
type Memory struct {
	Voters          []string  `json:"voters"`
	VotersChangedAt time.Time `json:"voters_changed_at"`
	// Named is the voter this decision named to leave, every step and gate
	// but the hysteresis ok; empty when none.
	Named string `json:"named"`
	// NamedDecisions counts the consecutive decisions, this one included,
	// that named Named; 0 when none.
	NamedDecisions int `json:"named_decisions"`
	// NamedSince is the time of the first of those decisions; the swap is
	// published once every voter's record has been seen changing after it.
	// Zero when none.
	NamedSince time.Time `json:"named_since,omitzero"`
	// ConnectsSlowAt is the last decision at which a connect between two
	// voters was slow (either end over the limit): etcd's round trips may
	// carry that delay for rttLag after, and do not name a voter alone
	// meanwhile. Zero when none has been.
	ConnectsSlowAt time.Time `json:"connects_slow_at,omitzero"`
	// MemberLateAt is the last decision at which a voter ran late enough
	// for etcd's round trips to it to carry it (a wake-up of its window
	// late by the round-trip limit over etcd's smoothing weight, or unfit
	// by wakeup_late), and MemberLate that voter (the first by name): a
	// member run that late (stopped, starved) answers its peers' probes as
	// late, and etcd's round trips may carry that for rttLag after, as they
	// carry a slow path. Zero when none has been.
	MemberLateAt time.Time `json:"member_late_at,omitzero"`
	MemberLate   string    `json:"member_late,omitempty"`
	// Flaps counts, over every decision carried forward, a swap published at
	// one decision and not at the next while the voter set stayed the same.
	Flaps int `json:"flaps"`
	// VerdictChanges counts, over every decision carried forward, a host's
	// verdict that differs from the one the previous decision gave it.
	VerdictChanges int `json:"verdict_changes"`
	// UnprotectedAt is the last decision at which the records were seen
	// unprotected: a probe's withheld marker in a record (in any version
	// the controller's watch delivered), or the controller's own read of
	// the admission policy not in force (UnprotectedWhy). While it is set
	// no swap is published (gate_protected) and the hosts in Unprotected
	// are unknown; it is cleared once the policy reads in force, no marker
	// has come for entry_unchanged, and every recording host has written
	// its samples after it (protection.go). Zero while protected.
	UnprotectedAt  time.Time `json:"unprotected_at,omitzero"`
	UnprotectedWhy string    `json:"unprotected_why,omitempty"`
	Unprotected    []string  `json:"unprotected,omitempty"`
}

// Marshal writes the status document: JSON, the same bytes for the same
// status (hosts sorted, maps absent, floats in Go's shortest form), and
// never more than MaxStatusBytes, so that the API server always takes it.
// It is the full decision, indented, when that fits; otherwise the first
// form of fit.go that does.
func (s Status) Marshal() ([]byte, error) { return s.MarshalWithin(MaxStatusBytes) }

// UnmarshalStatus reads a status document of this schema, in any form. It
// puts the texts of a document's table back in the reasons that name them,
// so the Status it gives holds no Texts and no references.
func UnmarshalStatus(data []byte) (*Status, error) {
	var s Status
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("decode status: %w", err)
	}
	if s.Schema != Schema {
		return nil, fmt.Errorf("decode status: schema %q, this fleet-role reads %q", s.Schema, Schema)
	}
	if s.Form == "" {
		s.Form = FormFull // written before documents had forms
	}
	// Written before the attributed tolerance: it is never under the
	// tolerance, which counts more voters as lost, and with none cleared
	// the two are one.
	if s.FailureTolerance.Attributed < s.FailureTolerance.Tolerance {
		s.FailureTolerance.Attributed = s.FailureTolerance.Tolerance
	}
	if err := s.resolveTexts(); err != nil {
		return nil, fmt.Errorf("decode status: %w", err)
	}
	return &s, nil
}

// StatusFromJSON reads a previous status from either a status document
// (status.json) or the fleet-role-status ConfigMap as `kubectl get -o json`
// prints it.
func StatusFromJSON(data []byte) (*Status, error) {
	var probe struct {
		Kind string            `json:"kind"`
		Data map[string]string `json:"data"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("decode previous status: %w", err)
	}
	if probe.Kind != "ConfigMap" {
		return UnmarshalStatus(data)
	}
	raw, ok := probe.Data[StatusKey]
	if !ok {
		return nil, fmt.Errorf("decode previous status: the ConfigMap has no %s key", StatusKey)
	}
	return UnmarshalStatus([]byte(raw))
}
