package cli

import (
	"bytes"
	"strings"
	"testing"
)

// A bad flag or setting stops the actuator with exit 2 and a message that
// names the input and the rule it broke, before it reads or writes
// anything.
func TestActuatorRefusesBadFlags(t *testing.T) {
	long := strings.Repeat("n", 240)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--node="}, "--node is empty"},
		{[]string{"--node=" + long}, "its actuator record"},
		{[]string{"--node=x", "--host-root=host"}, `--host-root "host" is not an absolute path`},
		{[]string{"--node=x", "--state-dir=state"}, `--state-dir "state" is not an absolute path`},
		{[]string{"--node=x", "--k3s-restart=reboot"}, `--k3s-restart "reboot": want systemd (a real host) or file:DIR`},
		{[]string{"--node=x", "--k3s-restart=file:run/lab"}, "must be an absolute path on the host"},
		{[]string{"--node=x", "--k3s-unit=k3s service"}, `--k3s-unit "k3s service": want a systemd unit name`},
		{[]string{"--node=x", "--nsenter=nsenter"}, `--nsenter "nsenter": want an absolute path on the host`},
		{[]string{"--node=x", "--etcd-endpoint=127.0.0.1:2382"}, `--etcd-endpoint "127.0.0.1:2382": want http(s)://HOST:PORT`},
		{[]string{"--node=x", "--etcd-ca="}, "needs etcd's CA, a client certificate and its key"},
		{[]string{"--node=x", "--sample-period=0s"}, "sample_period = 0s"},
	} {
		t.Setenv("NODE_NAME", "")
		var out, errb bytes.Buffer
		code := Main(append([]string{"actuator", "--kubeconfig=/nonexistent"}, tc.args...), &out, &errb)
		if code != ExitUsage || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("actuator %v: exit %d, stderr %q; want exit 2 saying %s", tc.args, code, errb.String(), tc.want)
		}
	}
}
