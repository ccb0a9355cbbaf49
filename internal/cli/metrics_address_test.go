package cli

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/fleet-role/fleet-role/internal/kube"
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

// The page's address for the Service's Endpoints: the Pod's name and IP
// from the downward API and the served port; anything else is refused,
// naming what was read.
func TestPodAddress(t *testing.T) {
	for _, c := range []struct {
		name, ip, serving string
		want              kube.PageAddress
		err               string
	}{
		{name: "fleet-role-1", ip: "10.42.0.7", serving: ":9870", want: kube.PageAddress{Namespace: "fleet-role", Pod: "fleet-role-1", IP: "10.42.0.7", Port: 9870}},
		{name: "fleet-role-1", ip: "fd00::7", serving: "[fd00::7]:9870", want: kube.PageAddress{Namespace: "fleet-role", Pod: "fleet-role-1", IP: "fd00::7", Port: 9870}},
		{name: "", ip: "10.42.0.7", serving: ":9870", err: `POD_NAME "" and POD_IP "10.42.0.7" must name this Pod`},
		{name: "fleet-role-1", ip: "pod-ip", serving: ":9870", err: `POD_IP "pod-ip"`},
		{name: "fleet-role-1", ip: "10.42.0.7", serving: "", err: `served at "" (--metrics-address), which names no port`},
		{name: "fleet-role-1", ip: "10.42.0.7", serving: ":0", err: "names no port"},
		{name: "fleet-role-1", ip: "10.42.0.7", serving: ":65536", err: "names no port"},
		{name: "fleet-role-1", ip: "10.42.0.7", serving: ":65535", want: kube.PageAddress{Namespace: "fleet-role", Pod: "fleet-role-1", IP: "10.42.0.7", Port: 65535}},
	} {
		t.Setenv("POD_NAME", c.name)
		t.Setenv("POD_IP", c.ip)
		got, err := podAddress("fleet-role", c.serving)
		if got != c.want || (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("POD_NAME %q POD_IP %q serving %q: %+v, %v; want %+v, error %q", c.name, c.ip, c.serving, got, err, c.want, c.err)
		}
	}
}
