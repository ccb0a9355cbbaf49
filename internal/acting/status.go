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
}

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
