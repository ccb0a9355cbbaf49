package acting

import (
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/lab/fleets/k3sfleet"
)

// Only a panic in etcd's server code, on the leaving voter, from a sample
// before its removal was observed to its settle's end, is put down to the
// removal; the limits at, just inside and just outside.
func TestEtcdPanicAfterRemoval(t *testing.T) {
	at := time.Date(2026, 12, 7, 5, 12, 0, 0, time.UTC)
	rm := []removal{{host: "server-3", removed: at, settled: at.Add(20 * time.Second)}}
	etcdPanic := "panic: runtime error: invalid memory address or nil pointer dereference\n\ngoroutine 812 [running]:\ngo.etcd.io/etcd/server/v3/storage/backend.(*backend).Size(...)"
	for _, c := range []struct {
		name  string
		host  string
		seen  time.Time
		crash string
		want  bool
	}{
		{"at the removal", "server-3", at, etcdPanic, true},
		{"a sample before the removal was observed", "server-3", at.Add(-observerInterval), etcdPanic, true},
		{"just before that", "server-3", at.Add(-observerInterval - time.Millisecond), etcdPanic, false},
		{"at the settle's end", "server-3", at.Add(20 * time.Second), etcdPanic, true},
		{"just after it", "server-3", at.Add(20*time.Second + time.Millisecond), etcdPanic, false},
		{"another host", "server-2", at.Add(time.Second), etcdPanic, false},
		{"a panic elsewhere", "server-3", at.Add(time.Second), "panic: boom\n\ngoroutine 1 [running]:\ngithub.com/k3s-io/k3s/pkg/etcd.(*ETCD).manageLearners", false},
		{"no panic", "server-3", at.Add(time.Second), "", false},
	} {
		_, got := etcdPanicAfterRemoval(k3sfleet.Restart{Host: c.host, Seen: c.seen, Crash: c.crash, Exited: "exit status 2"}, rm)
		if got != c.want {
			t.Errorf("%s: put down to the removal %v, want %v", c.name, got, c.want)
		}
	}
}
