package cli

import (
	"bytes"
	"strings"
	"testing"
)

// A bad setting stops the probe with exit 2 and a message naming it.
func TestProbeRefusesBadSettings(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--node=", "--metrics-address="}, "--node is empty"},
		{[]string{"--node=n1", "--window=5", "--metrics-address="}, "window = 5"},
		{[]string{"--node=n1", "--sample-period=0s", "--metrics-address="}, "sample_period = 0s"},
		{[]string{"--node=n1", "--host-root=", "--metrics-address="}, "--host-root is empty"},
	} {
		t.Setenv("NODE_NAME", "")
		var out, errb bytes.Buffer
		code := Main(append([]string{"probe"}, tc.args...), &out, &errb)
		if code != ExitUsage || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("probe %v: exit %d, stderr %q; want exit 2 saying %s", tc.args, code, errb.String(), tc.want)
		}
	}
}
