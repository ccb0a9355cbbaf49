package cluster

import (
	"reflect"
	"testing"
)

// TestShellWords splits iptables -S lines as the kubelet's rules print
// them, so that each can be deleted with its own words.
func TestShellWords(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string
	}{
		{`INPUT -j KUBE-FIREWALL`, []string{"INPUT", "-j", "KUBE-FIREWALL"}},
		{`KUBE-FIREWALL ! -s 127.0.0.0/8 -d 127.0.0.0/8 -m comment --comment "block incoming localnet connections" -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP`,
			[]string{"KUBE-FIREWALL", "!", "-s", "127.0.0.0/8", "-d", "127.0.0.0/8", "-m", "comment", "--comment", "block incoming localnet connections", "-m", "conntrack", "!", "--ctstate", "RELATED,ESTABLISHED,DNAT", "-j", "DROP"}},
		{`X -m comment --comment "a \"quoted\" word" -j Y`, []string{"X", "-m", "comment", "--comment", `a "quoted" word`, "-j", "Y"}},
		{`X  -j  Y`, []string{"X", "-j", "Y"}},
		{``, nil},
	} {
		if got := shellWords(tc.line); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("shellWords(%q) = %q, want %q", tc.line, got, tc.want)
		}
	}
}

// TestOwnedChain: the kubelet's, the CNI's and the cluster's own chains
// are removed; the built-in chains and anyone else's are not.
func TestOwnedChain(t *testing.T) {
	for name, want := range map[string]bool{
		"KUBE-FIREWALL": true, "KUBE-KUBELET-CANARY": true, "CNI-HOSTPORT-DNAT": true, svcChain: true,
		"INPUT": false, "PREROUTING": false, "DOCKER": false, "KUBE": false, "frpods-svc": false,
	} {
		if got := ownedChain(name); got != want {
			t.Errorf("ownedChain(%q) = %v, want %v", name, got, want)
		}
	}
}
