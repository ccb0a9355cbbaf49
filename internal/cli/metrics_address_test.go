package cli

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// The default --metrics-address comes from the downward API's address when
// the manifests set it, bracketed when it is IPv6.
func TestMetricsAddressDefault(t *testing.T) {
	for _, c := range []struct {
		env, args []string
		want      string
		err       string
	}{
		{want: ":9871"},
		{env: []string{"HOST_IP", ""}, want: ":9871"},
		{env: []string{"HOST_IP", "10.0.3.7"}, want: "10.0.3.7:9871"},
		{env: []string{"HOST_IP", "fd00::7"}, want: "[fd00::7]:9871"},
		{env: []string{"HOST_IP", "node-7"}, want: "node-7:9871", err: `HOST_IP "node-7" is no IP address`},
		// A flag given wins, and an env it overrides is not checked.
		{env: []string{"HOST_IP", "node-7"}, args: []string{"--metrics-address=127.0.0.1:9999"}, want: "127.0.0.1:9999"},
		{env: []string{"HOST_IP", "10.0.3.7"}, args: []string{"--metrics-address="}, want: ""},
	} {
		if c.env != nil {
			t.Setenv(c.env[0], c.env[1])
		}
		f := pflag.NewFlagSet("probe", pflag.ContinueOnError)
		var addr string
		check := metricsAddressFlag(f, &addr, probeMetricsEnv, probeMetricsPort, "/metrics")
		if err := f.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		err := check()
		if addr != c.want || (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("env %v args %v: address %q error %v, want %q and %q", c.env, c.args, addr, err, c.want, c.err)
		}
	}
}
