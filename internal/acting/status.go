package acting

// Status is what the status document says of acting.
type Status struct {
	// Mode is the acting setting.
	Mode string `json:"mode"`
	// Plan is the step table of the swap the decision publishes; nil when
	// it publishes none.
	Plan *Plan `json:"plan,omitempty"`
	// Journal is the swap under way or the last one, as the journal holds
	// it; nil when there is none (always, with acting plan).
	Journal *Journal `json:"journal,omitempty"`
	// Stall says why the controller, acting guided or auto, could not run
	// the executor at this decision; nil when it ran.
	Stall *Stall `json:"stall,omitempty"`
}

// Stall is why the executor did not run: a code to steer by and a detail
// to read.
type Stall struct {
	Code   StallCode `json:"code"`
	Detail string    `json:"detail"`
}

// StallCode names why the executor did not run.
type StallCode string

// Stall codes.
const (
	// StallNoLease: the controller runs for no Lease, so nothing fences
	// its commands (acting needs --leader-elect).
	StallNoLease StallCode = "NoLease"
	// StallNotLeading: the term ended before the journal could be written.
	StallNotLeading StallCode = "NotLeading"
	// StallNoJournal: the install made no journal ConfigMap.
	StallNoJournal StallCode = "NoJournal"
	// StallJournalUnreadable: the journal ConfigMap holds a document the
	// controller cannot read; it writes nothing over it.
	StallJournalUnreadable StallCode = "JournalUnreadable"
	// StallJournalConflict: another wrote the journal since it was read.
	StallJournalConflict StallCode = "JournalConflict"
	// StallReadFailed and StallWriteFailed: the API server did not answer
	// a read or refused a write.
	StallReadFailed  StallCode = "ReadFailed"
	StallWriteFailed StallCode = "WriteFailed"
)

// WithoutAges is s as the status's fingerprint compares it: each guard
// that states a time since something, which grows at every decision,
// without its value. Nil for nil.
func (s *Status) WithoutAges() *Status {
	if s == nil || s.Plan == nil {
		return s
	}
	c := *s
	p := *s.Plan
	p.Steps = make([]Step, len(s.Plan.Steps))
	for i, st := range s.Plan.Steps {
		st.Guards = append([]Guard(nil), st.Guards...)
		for k := range st.Guards {
			if st.Guards[k].age {
				st.Guards[k].Value = nil
			}
		}
		p.Steps[i] = st
	}
	c.Plan = &p
	return &c
}
