package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleet-role/fleet-role/internal/status"
)

// `fleet-role timing --from` on the decision core's golden statuses: a
// healthy fleet's timing is covered (0), a fleet whose every voter link is
// slow (a slow network, no host to blame) is short (3) and gets the k3s
// lines, a fleet with no etcd readings is unmeasured (1); -o json is the
// status's timing object; bad flags exit 2.
func TestTimingCommand(t *testing.T) {
	golden := func(name string) string { return filepath.Join("..", "decide", "testdata", name, "status.json") }
	for _, tc := range []struct {
		scenario string
		code     int
		want     []string
	}{
		{"all-fit", TimingExitCovered, []string{"verdict             covered", "heartbeat interval  500 ms", "covers the slowest"}},
		{"every-link-slow", TimingExitShort, []string{"verdict             raise", "election timeout    5000 ms        6100 ms", "etcd-arg:\n  - heartbeat-interval=610\n  - election-timeout=6100\n"}},
		{"no-etcd", TimingExitUnmeasured, []string{"verdict  unmeasured", "no voter has measured"}},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			r := runMain("timing", "--from", golden(tc.scenario))
			if r.Code != tc.code {
				t.Fatalf("exit %d, want %d: %s%s", r.Code, tc.code, r.Stdout, r.Stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.Stdout, w) {
					t.Errorf("the table lacks %q:\n%s", w, r.Stdout)
				}
			}
			raw, err := os.ReadFile(golden(tc.scenario))
			if err != nil {
				t.Fatal(err)
			}
			st, err := status.UnmarshalStatus(raw)
			if err != nil {
				t.Fatal(err)
			}
			r = runMain("timing", "--from", golden(tc.scenario), "-o", "json")
			var got status.Timing
			if err := json.Unmarshal([]byte(r.Stdout), &got); err != nil || r.Code != tc.code {
				t.Fatalf("-o json: exit %d, %v: %s", r.Code, err, r.Stdout)
			}
			if a, b := mustMarshal(t, got), mustMarshal(t, st.Timing); a != b {
				t.Errorf("-o json printed %s, the status holds %s", a, b)
			}
		})
	}
	for _, bad := range [][]string{
		{"timing", "-o", "html"},
		{"timing", "--from", golden("all-fit"), "--kubeconfig", "x"},
		{"timing", "--from", filepath.Join(t.TempDir(), "missing.json")},
	} {
		if r := runMain(bad...); r.Code != StatusExitError {
			t.Errorf("%v: exit %d, want 2: %s", bad, r.Code, r.Stderr)
		}
	}
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
