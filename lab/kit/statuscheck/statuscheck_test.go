package statuscheck

import (
	"strings"
	"testing"

	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
)

const window = 20

// fitStatus is three hosts fit on full windows and the decision none
// because every voter is fit, as the controller writes it.
func fitStatus() *status.Status {
	return &status.Status{
		Hosts: []status.Host{
			{Name: "voter-1", Role: "voter", Verdict: status.Fit, Samples: window},
			{Name: "voter-2", Role: "voter", Verdict: status.Fit, Samples: window},
			{Name: "standby-1", Role: "standby", Verdict: status.Fit, Samples: window},
		},
		Decision: status.Decision{Action: status.ActionNone, Reasons: []status.Reason{
			{Signal: status.StepReplace, OK: false, Detail: "every voter is fit: nothing to replace"},
		}},
	}
}

func TestEveryFit(t *testing.T) {
	if err := EveryFit(fitStatus(), window); err != nil {
		t.Fatalf("every host fit on a full window: %v", err)
	}
	v, l := 0.114, 0.05
	for _, c := range []struct {
		what   string
		change func(*status.Status)
		skip   []string
		want   []string // in the error; none when it holds
	}{
		{"a window not full", func(st *status.Status) { st.Hosts[2].Samples = 12 }, nil, []string{"standby-1 12 of 20 samples"}},
		{"an unfit host and its reason", func(st *status.Status) {
			st.Hosts[1].Verdict = status.Unfit
			st.Hosts[1].Reasons = []status.Reason{{Signal: "connect", Subject: "voter-1", Value: &v, Limit: &l, Unit: "seconds", Rule: "at_most", OK: false}}
		}, nil, []string{"voter-2 unfit: connect voter-1"}},
		{"every held host named", func(st *status.Status) {
			st.Hosts[0].Verdict = status.Unknown
			st.Hosts[2].Samples = 3
		}, nil, []string{"voter-1 unknown", "standby-1 3 of 20 samples"}},
		{"a skipped host holds nothing", func(st *status.Status) { st.Hosts[2].Verdict = status.Unknown }, []string{"standby-1"}, nil},
		{"no host", func(st *status.Status) { st.Hosts = nil }, nil, []string{"no host"}},
		{"a swap", func(st *status.Status) {
			st.Decision.Action, st.Decision.Out, st.Decision.In = status.ActionSwap, "voter-1", "standby-1"
		}, nil, []string{"swap voter-1 -> standby-1"}},
	} {
		st := fitStatus()
		c.change(st)
		err := EveryFit(st, window, c.skip...)
		if len(c.want) == 0 {
			if err != nil {
				t.Errorf("%s: %v, want it to hold", c.what, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: holds, want an error naming %q", c.what, c.want)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", c.what, err, w)
			}
		}
	}
}

func TestAllFit(t *testing.T) {
	s := settings.Settings{Window: window}
	hosts := []string{"voter-1", "voter-2", "standby-1"}
	if err := AllFit(fitStatus(), hosts, s); err != nil {
		t.Fatalf("every named host fit: %v", err)
	}
	for _, c := range []struct {
		what   string
		change func(*status.Status)
		hosts  []string
		want   string
	}{
		{"a host missing", func(*status.Status) {}, append(hosts[:3:3], "standby-2"), "standby-2 is not in the status"},
		{"a host not named", func(*status.Status) {}, hosts[:2], "3 hosts in the status, want 2"},
		{"a window not full", func(st *status.Status) { st.Hosts[0].Samples = window - 1 }, hosts, "voter-1 19 of 20 samples"},
		{"the decision's reason", func(st *status.Status) { st.Decision.Reasons[0].Detail = "voter-2 is unknown" }, hosts, "does not say that nothing is unfit"},
		{"no replace step", func(st *status.Status) { st.Decision.Reasons = nil }, hosts, "does not say that nothing is unfit"},
	} {
		st := fitStatus()
		c.change(st)
		if err := AllFit(st, c.hosts, s); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.what, err, c.want)
		}
	}
}
