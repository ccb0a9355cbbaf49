// Package etcdmetrics reads an etcd member's metrics page (k3s serves it on
// http://127.0.0.1:2381/metrics) and computes what the member gained between
// two scrapes: its WAL fsync and backend commit latency, its round trip to
// each peer, its leader changes, and the gauges that say what it is now.
//
// Work is split as the probe needs it: Scrape (or Parse, over a reader) turns
// one page into a Snapshot, and Gained compares two Snapshots. The probe
// scrapes once per period and takes the gain against its previous scrape;
// `fleet-role check etcd` scrapes twice an interval apart.
package etcdmetrics

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The series the reading is made of, as etcd v3.6.15 names them.
const (
	metricWALFsync      = "etcd_disk_wal_fsync_duration_seconds"
	metricBackendCommit = "etcd_disk_backend_commit_duration_seconds"
	metricPeerRTT       = "etcd_network_peer_round_trip_time_seconds"
	metricLeaderChanges = "etcd_server_leader_changes_seen_total"
	metricIsLeader      = "etcd_server_is_leader"
	metricIsLearner     = "etcd_server_is_learner"
	metricHasLeader     = "etcd_server_has_leader"
	metricActivePeers   = "etcd_network_active_peers"
	metricKnownPeers    = "etcd_network_known_peers"
	metricServerID      = "etcd_server_id"
	metricDBSize        = "etcd_mvcc_db_total_size_in_bytes"
	metricQuota         = "etcd_server_quota_backend_bytes"
	metricProcessStart  = "process_start_time_seconds"
)

// peerLabels are the series whose label names a peer by its member ID. On a
// page without etcd_network_known_peers (releases before it), a peer is known
// when any of them names it. The ID "0" (bytes received before a sender's ID
// was known) is no peer.
var peerLabels = map[string]string{
	metricActivePeers:                           "Remote",
	"etcd_network_disconnected_peers_total":     "Remote",
	metricPeerRTT:                               "To",
	"etcd_network_peer_sent_bytes_total":        "To",
	"etcd_network_peer_sent_failures_total":     "To",
	"etcd_network_peer_received_bytes_total":    "From",
	"etcd_network_peer_received_failures_total": "From",
}

// wanted are the families Parse reads: a member's page holds about 1,700
// lines of about 150 families, of which these are some 120 lines, and parsing
// the rest was most of a probe sample's CPU.
var wanted = func() map[string]bool {
	m := map[string]bool{}
	for _, name := range []string{metricWALFsync, metricBackendCommit, metricPeerRTT, metricLeaderChanges,
		metricIsLeader, metricIsLearner, metricHasLeader, metricActivePeers, metricKnownPeers, metricServerID,
		metricDBSize, metricQuota, metricProcessStart} {
		m[name] = true
	}
	for name := range peerLabels {
		m[name] = true
	}
	return m
}()

// keepFamilies returns the lines of page that belong to the wanted families:
// their samples (a histogram's _bucket, _sum and _count included) and their
// HELP and TYPE comments. Other comments and families are dropped before the
// text parser sees them, and so are the series of members no longer in the
// cluster: etcd never deletes a removed member's series, and its
// etcd_network_known_peers reads 0 (where the page has that gauge).
func keepFamilies(page []byte) []byte {
	known := knownIDs(page)
	out := make([]byte, 0, len(page)/8)
	for len(page) > 0 {
		line := page
		if i := bytes.IndexByte(page, '\n'); i >= 0 {
			line, page = page[:i+1], page[i+1:]
		} else {
			page = nil
		}
		// A line that is no sample of any metric is kept, so that a page
		// that is not the text format at all still fails to parse.
		fam := familyOf(line)
		if !wanted[string(fam)] && looksLikeSample(line) {
			continue
		}
		if l, ok := peerLabels[string(fam)]; ok && known != nil && line[0] != '#' {
			if id := labelIn(line, l); id != "" && id != "0" && !known[id] {
				continue
			}
		}
		out = append(out, line...)
		if len(out) > MaxKeptBytes {
			return out // refused by the caller; reading on would only cost
		}
	}
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	return out
}

// knownIDs are the Remote IDs etcd_network_known_peers holds above zero (the
// members of the cluster, this one included), nil when the page has no
// such series. Its lines are read without the parser: a sample line is the
// name, the labels, and the value last.
func knownIDs(page []byte) map[string]bool {
	var known map[string]bool
	prefix := []byte("\n" + metricKnownPeers + "{")
	for rest := page; ; {
		i := bytes.Index(rest, prefix)
		if i < 0 {
			return known
		}
		line := rest[i+1:]
		if j := bytes.IndexByte(line, '\n'); j >= 0 {
			line = line[:j]
		}
		rest = rest[i+len(prefix):]
		if known == nil {
			known = map[string]bool{}
		}
		f := bytes.Fields(line[bytes.LastIndexByte(line, '}')+1:])
		if len(f) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(string(f[0]), 64); err == nil && v > 0 {
			if id := labelIn(line, "Remote"); id != "" {
				known[id] = true
			}
		}
	}
}

// labelIn is the value of label name in a sample line, "" when absent. Member
// IDs hold no escapes; a value with one is returned as written, which no ID
// matches.
func labelIn(line []byte, name string) string {
	key := []byte(name + `="`)
	for off := 0; ; {
		i := bytes.Index(line[off:], key)
		if i < 0 {
			return ""
		}
		i += off
		if i > 0 && (line[i-1] == '{' || line[i-1] == ',' || line[i-1] == ' ') {
			v := line[i+len(key):]
			if j := bytes.IndexByte(v, '"'); j >= 0 {
				return string(v[:j])
			}
			return ""
		}
		off = i + len(key)
	}
}

// looksLikeSample says whether a line is a comment, blank, or starts with a
// metric name, as every line of a well-formed page does.
func looksLikeSample(line []byte) bool {
	line = bytes.TrimLeft(line, " \t")
	if len(line) == 0 || line[0] == '#' || line[0] == '\n' || line[0] == '\r' {
		return true
	}
	c := line[0]
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// familyOf names the family a line of the text format belongs to, nil for
// a comment that is not HELP or TYPE, as a slice of the line: looked up as
// string(name) in a map, it allocates nothing (each line of every page
// passes here).
func familyOf(line []byte) []byte {
	if bytes.HasPrefix(line, []byte("# HELP ")) || bytes.HasPrefix(line, []byte("# TYPE ")) {
		rest := line[len("# HELP "):]
		if i := bytes.IndexAny(rest, " \t\n"); i >= 0 {
			rest = rest[:i]
		}
		return rest
	}
	if len(line) == 0 || line[0] == '#' {
		return nil
	}
	name := line
	if i := bytes.IndexAny(name, "{ \t\n"); i >= 0 {
		name = name[:i]
	}
	if wanted[string(name)] {
		return name
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := bytes.CutSuffix(name, []byte(suffix)); ok && wanted[string(base)] {
			return base
		}
	}
	return nil
}

// ErrNoData means the page parsed but holds no etcd server metrics: the URL
// serves something other than an etcd member's page.
var ErrNoData = errors.New("no etcd server metrics on the page")

// Cumulative is one histogram as a page shows it: the finite upper bounds,
// the cumulative count at each and, last, the total (the +Inf bucket), and
// the sum of the observations.
type Cumulative struct {
	Bounds []float64
	Counts []uint64 // cumulative; len(Bounds)+1, the +Inf bucket last
	Sum    float64
}

// Count is the number of observations.
func (c Cumulative) Count() uint64 {
	if len(c.Counts) == 0 {
		return 0
	}
	return c.Counts[len(c.Counts)-1]
}

// Snapshot is what one scrape of a member's page says.
type Snapshot struct {
	// Time is when the page was read (zero from Parse).
	Time time.Time
	// MemberID is the member's own ID, unpadded lowercase hex, from
	// etcd_server_id{server_id}; "" when the page lacks it.
	MemberID                       string
	IsLeader, IsLearner, HasLeader bool
	// ActivePeers is etcd_network_active_peers by Remote peer ID, the
	// largest value where several Local IDs name the same Remote.
	ActivePeers map[string]float64
	// KnownPeers are the IDs of the other members of the cluster as this
	// member knows them, sorted: etcd_network_known_peers above zero
	// (3.6.15 writes one series per member, itself included, and 0 for a
	// removed member), this member excluded. Pages without that gauge
	// fall back to the IDs any peer series names (see peerLabels).
	KnownPeers    []string
	LeaderChanges float64
	WALFsync      Cumulative
	BackendCommit Cumulative
	// PeerRTT is the round-trip histogram by the peer ID in its To label.
	PeerRTT     map[string]Cumulative
	DBSizeBytes int64
	QuotaBytes  int64
	// ProcessStart is process_start_time_seconds (Unix seconds), 0 when
	// absent. A different start time means the member restarted.
	ProcessStart float64
}

// Parse reads one metrics page in the Prometheus text format, at most
// MaxPageBytes of it. It returns ErrNoData when the page has no etcd server
// gauges.
func Parse(r io.Reader) (*Snapshot, error) {
	page, err := io.ReadAll(io.LimitReader(r, MaxPageBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read metrics page: %w", err)
	}
	return parse(context.Background(), page)
}

// parse reads the snapshot from a page held in memory, giving up once ctx
// is done: the page's size bounds the parse's time, and ctx is looked at
// between its steps, so a scrape whose deadline passed returns no result.
func parse(ctx context.Context, page []byte) (*Snapshot, error) {
	if len(page) > MaxPageBytes {
		return nil, fmt.Errorf("metrics page larger than %d bytes (MaxPageBytes): not an etcd page", MaxPageBytes)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("parse metrics page: %w", context.Cause(ctx))
	}
	return parseKept(ctx, keepFamilies(page))
}

// parseKept is parse's after the page is filtered (keepFamilies, readKept).
func parseKept(ctx context.Context, kept []byte) (*Snapshot, error) {
	if len(kept) > MaxKeptBytes {
		return nil, fmt.Errorf("the page's etcd series the reading uses take %d bytes, more than %d (MaxKeptBytes): a member of 7 has about 17 KB of them", len(kept), MaxKeptBytes)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("parse metrics page: %w", context.Cause(ctx))
	}
	s, err := parseText(kept)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("parse metrics page: %w", context.Cause(ctx))
	}
	return s, nil
}

// boundedError keeps an error whose text quotes the page (the text parser
// quotes the token it stopped at) from carrying a hostile page's bytes into
// logs and the probe's entry: its text is cut at maxErrorText bytes.
type boundedError struct{ err error }

// maxErrorText is the most of an error's text kept: a line and a half of a
// real page (its longest line is 241 bytes).
const maxErrorText = 360

func (e boundedError) Error() string { return boundText(e.err.Error()) }
func (e boundedError) Unwrap() error { return e.err }

// boundText cuts text from another party at maxErrorText bytes.
func boundText(s string) string {
	if len(s) <= maxErrorText {
		return s
	}
	return fmt.Sprintf("%s... (%d bytes)", s[:maxErrorText], len(s))
}

// quoteID quotes a label value for an error, cut to what an ID can be and
// its length told.
func quoteID(v string) string {
	if len(v) <= 2*maxIDDigits {
		return fmt.Sprintf("%q", v)
	}
	return fmt.Sprintf("%q... (%d bytes)", v[:2*maxIDDigits], len(v))
}

// maxIDDigits: etcd prints a member ID, a uint64, as unpadded lowercase hex
// (docs/facts.md, "etcd metrics as they really appear").
const maxIDDigits = 16

// checkID refuses a label value that is no member ID.
func checkID(series, label, v string) error {
	ok := len(v) > 0 && len(v) <= maxIDDigits
	for i := 0; ok && i < len(v); i++ {
		c := v[i]
		ok = c >= '0' && c <= '9' || c >= 'a' && c <= 'f'
	}
	if !ok {
		return fmt.Errorf("%s{%s=%s}: not an etcd member ID (unpadded lowercase hex of at most %d digits, docs/facts.md)", series, label, quoteID(v), maxIDDigits)
	}
	return nil
}

// parseText parses a page in the text format and reads the snapshot from it.
func parseText(page []byte) (*Snapshot, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(page))
	if err != nil {
		return nil, fmt.Errorf("parse metrics page: %w", boundedError{err})
	}
	if fams[metricHasLeader] == nil && fams[metricServerID] == nil {
		return nil, ErrNoData
	}
	s := &Snapshot{
		ActivePeers: map[string]float64{},
		PeerRTT:     map[string]Cumulative{},
	}
	for _, m := range metrics(fams, metricServerID) {
		if id := label(m, "server_id"); id != "" && value(m) > 0 {
			if err := checkID(metricServerID, "server_id", id); err != nil {
				return nil, err
			}
			s.MemberID = id
		}
	}
	s.IsLeader = gauge(fams, metricIsLeader) > 0
	s.IsLearner = gauge(fams, metricIsLearner) > 0
	s.HasLeader = gauge(fams, metricHasLeader) > 0
	s.LeaderChanges = gauge(fams, metricLeaderChanges)
	s.DBSizeBytes = int64(gauge(fams, metricDBSize))
	s.QuotaBytes = int64(gauge(fams, metricQuota))
	s.ProcessStart = gauge(fams, metricProcessStart)

	for _, m := range metrics(fams, metricActivePeers) {
		remote := label(m, "Remote")
		if remote == "" {
			continue
		}
		if !ownPair(m, s.MemberID) {
			continue
		}
		if err := checkID(metricActivePeers, "Remote", remote); err != nil {
			return nil, err
		}
		if v := value(m); v > s.ActivePeers[remote] || !has(s.ActivePeers, remote) {
			s.ActivePeers[remote] = v
		}
	}
	known := map[string]bool{}
	if fams[metricKnownPeers] != nil {
		// 3.6.15 writes 1 for every member of the cluster, itself
		// included, and 0 for a member since removed.
		for _, m := range metrics(fams, metricKnownPeers) {
			if id := label(m, "Remote"); id != "" && id != s.MemberID && ownPair(m, s.MemberID) && value(m) > 0 {
				if err := checkID(metricKnownPeers, "Remote", id); err != nil {
					return nil, err
				}
				known[id] = true
			}
		}
	} else {
		for name, l := range peerLabels {
			for _, m := range metrics(fams, name) {
				if id := label(m, l); id != "" && id != "0" && id != s.MemberID && ownPair(m, s.MemberID) {
					if err := checkID(name, l, id); err != nil {
						return nil, err
					}
					known[id] = true
				}
			}
		}
	}
	for id := range known {
		s.KnownPeers = append(s.KnownPeers, id)
	}
	sort.Strings(s.KnownPeers)
	if err := checkPeers(s); err != nil {
		return nil, err
	}

	if s.WALFsync, err = histogram(fams, metricWALFsync); err != nil {
		return nil, err
	}
	if s.BackendCommit, err = histogram(fams, metricBackendCommit); err != nil {
		return nil, err
	}
	for _, m := range metrics(fams, metricPeerRTT) {
		to := label(m, "To")
		if to == "" || m.GetHistogram() == nil {
			continue
		}
		if err := checkID(metricPeerRTT, "To", to); err != nil {
			return nil, err
		}
		h, err := cumulative(m.GetHistogram())
		if err != nil {
			return nil, fmt.Errorf("%s{To=%q}: %w", metricPeerRTT, to, err)
		}
		s.PeerRTT[to] = h
	}
	return s, nil
}

// checkPeers refuses a page naming more peers than a member can have: more
// known members than MaxPeers, or more connected. Series of removed members
// stay on a page (etcd never deletes them), so the known members are those
// etcd_network_known_peers holds above zero, and the connected ones those
// etcd_network_active_peers does; on pages without known_peers (releases
// before 3.6) every ID a peer series names is known, removed members
// included, and such a page of a member that outlived more than MaxPeers
// others is refused too.
func checkPeers(s *Snapshot) error {
	if n := len(s.KnownPeers); n > MaxPeers {
		return fmt.Errorf("the page names %d known peers: an etcd cluster has at most 7 members (docs/facts.md), a member at most %d peers", n, MaxPeers)
	}
	connected := 0
	for _, v := range s.ActivePeers {
		if v > 0 {
			connected++
		}
	}
	if connected > MaxPeers {
		return fmt.Errorf("%s: %d connected peers: an etcd cluster has at most 7 members (docs/facts.md), a member at most %d peers", metricActivePeers, connected, MaxPeers)
	}
	return nil
}

// ownPair reports a peer-pair series whose Local is this member. Members
// embedded in one process share a registry and show each other's pairs
// (docs/facts.md); a page of one member has only its own.
func ownPair(m *dto.Metric, self string) bool {
	loc := label(m, "Local")
	return self == "" || loc == "" || loc == self
}

func has(m map[string]float64, k string) bool { _, ok := m[k]; return ok }

func metrics(fams map[string]*dto.MetricFamily, name string) []*dto.Metric {
	if f := fams[name]; f != nil {
		return f.GetMetric()
	}
	return nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// value is a sample's value whatever its declared type (an untyped page
// parses as untyped).
func value(m *dto.Metric) float64 {
	switch {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetUntyped() != nil:
		return m.GetUntyped().GetValue()
	}
	return 0
}

// gauge is the value of an unlabelled series, 0 when absent.
func gauge(fams map[string]*dto.MetricFamily, name string) float64 {
	ms := metrics(fams, name)
	if len(ms) == 0 {
		return 0
	}
	v := value(ms[0])
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}

// histogram reads an unlabelled histogram; absent is empty, not an error.
func histogram(fams map[string]*dto.MetricFamily, name string) (Cumulative, error) {
	for _, m := range metrics(fams, name) {
		if h := m.GetHistogram(); h != nil {
			c, err := cumulative(h)
			if err != nil {
				return Cumulative{}, fmt.Errorf("%s: %w", name, err)
			}
			return c, nil
		}
	}
	return Cumulative{}, nil
}

// cumulative checks a parsed histogram's shape: finite ascending bounds
// with counts that never fall, and a total no smaller than the last bucket.
func cumulative(h *dto.Histogram) (Cumulative, error) {
	var c Cumulative
	for _, b := range h.GetBucket() {
		ub := b.GetUpperBound()
		if math.IsInf(ub, +1) {
			continue // the parser keeps +Inf as a bucket; the total stands for it
		}
		if math.IsNaN(ub) || math.IsInf(ub, -1) {
			return Cumulative{}, fmt.Errorf("bucket bound %g", ub)
		}
		if n := len(c.Bounds); n > 0 && !(ub > c.Bounds[n-1]) {
			return Cumulative{}, fmt.Errorf("bucket bound %g after %g", ub, c.Bounds[n-1])
		}
		if n := len(c.Counts); n > 0 && b.GetCumulativeCount() < c.Counts[n-1] {
			return Cumulative{}, fmt.Errorf("bucket le=%g count %d below the bucket before (%d)", ub, b.GetCumulativeCount(), c.Counts[n-1])
		}
		c.Bounds = append(c.Bounds, ub)
		c.Counts = append(c.Counts, b.GetCumulativeCount())
	}
	total := h.GetSampleCount()
	if n := len(c.Counts); n > 0 && total < c.Counts[n-1] {
		return Cumulative{}, fmt.Errorf("count %d below the last bucket's %d", total, c.Counts[n-1])
	}
	c.Counts = append(c.Counts, total)
	c.Sum = h.GetSampleSum()
	return c, nil
}
