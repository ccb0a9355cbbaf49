package settings

import "testing"

// The prefix as the NodeRestriction plugin judges it
// (plugin/pkg/admission/noderestriction: the key's prefix is
// node-restriction.kubernetes.io or ends in .node-restriction.kubernetes.io).
func TestAdminOnlyLabel(t *testing.T) {
	for key, want := range map[string]bool{
		"node-restriction.kubernetes.io/fleet-role-voter-eligible":   true,
		"fleet-role.node-restriction.kubernetes.io/voter-eligible":   true,
		"fleet-role.io/voter-eligible":                               false,
		"node-restriction.kubernetes.io.example.com/voter":           false,
		"xnode-restriction.kubernetes.io/voter":                      false,
		"kubernetes.io/voter":                                        false,
		"voter-eligible":                                             false,
		"node-restriction.kubernetes.io":                             false,
		"example.com/node-restriction.kubernetes.io":                 false,
		"a.b.node-restriction.kubernetes.io/fleet-role-voter-pinned": true,
	} {
		if got := AdminOnlyLabel(key); got != want {
			t.Errorf("AdminOnlyLabel(%q) = %v, want %v", key, got, want)
		}
	}
	s := Defaults()
	if got := s.SelfSetLabels(); len(got) != 2 {
		t.Errorf("the default keys %s and %s: self-set %v, want both", s.EligibleLabel, s.PinnedLabel, got)
	}
	s.EligibleLabel = NodeRestrictionPrefix + "fleet-role-voter-eligible"
	if got := s.SelfSetLabels(); len(got) != 1 || got[0] != "pinned_label" {
		t.Errorf("self-set %v, want pinned_label alone", got)
	}
}
