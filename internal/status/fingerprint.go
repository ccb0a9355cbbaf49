package status

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"time"
)

// Fingerprint identifies what the status says, leaving out what changes
// with the time of the decision alone: when it was generated, and the ages
// stated by each host's freshness reason, by the cooldown gate and by the
// decision's reasons that quote a host's age. The times those ages count
// from are compared (each host's observation, the memory's
// voters_changed_at), and so is every verdict and ok: a host going stale or
// a cooldown ending is a change. Two decisions with the same fingerprint
// would publish the same document but for their ages, so the controller
// need not write the second.
//
// It is defined on a Status as Decide returns it, which knows which of its
// figures are ages; a Status read back from its document does not, and its
// fingerprint compares them too.
func (s *Status) Fingerprint() ([sha256.Size]byte, error) {
	sum := sha256.New()
	enc := json.NewEncoder(sum)
	// Host by host, through one scratch slice of reasons: a copy of every
	// host's reasons at once would be as large as the reasons.
	head := *s
	// The history gains a decision every round, as the ages change.
	head.GeneratedAt, head.Hosts, head.History = time.Time{}, nil, nil
	head.Decision.Reasons = withoutAges(nil, s.Decision.Reasons)
	head.Acting = s.Acting.WithoutAges()
	if err := enc.Encode(head); err != nil {
		return [sha256.Size]byte{}, fmt.Errorf("fingerprint status: %w", err)
	}
	var scratch []Reason
	for _, h := range s.Hosts {
		scratch = withoutAges(scratch[:0], h.Reasons)
		h.Reasons = scratch
		if err := enc.Encode(h); err != nil {
			return [sha256.Size]byte{}, fmt.Errorf("fingerprint status: host %s: %w", h.Name, err)
		}
	}
	var out [sha256.Size]byte
	sum.Sum(out[:0])
	return out, nil
}

// withoutAges appends rs to buf, each reason that states an age (its Since
// set) as typed state alone: its code, subject, outcome, limit and the
// time the age counts from, without the value and words that state the
// age. Its words are written from those and from what the status holds
// elsewhere (the memory, the hosts' observations), which the fingerprint
// compares there.
func withoutAges(buf, rs []Reason) []Reason {
	buf = append(buf, rs...)
	for i := range buf {
		if r := &buf[i]; !r.Since.IsZero() {
			// Since is not in the document: the fingerprint holds it in
			// the words' place.
			r.Detail, r.Value = r.Since.UTC().Format(time.RFC3339Nano), nil
		}
	}
	return buf
}
