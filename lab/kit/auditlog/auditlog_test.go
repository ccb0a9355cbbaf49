package auditlog

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testdata/k3s-audit.log holds three events as k3s v1.34.2's API server
// logged them in test/k3s: the probe's token patching its own record (a
// dry run), the API server patching a status subresource, and the probe's
// token refused the create of another node's record.
func TestReadK3sLog(t *testing.T) {
	var got []Event
	if err := Read(filepath.Join("testdata", "k3s-audit.log"), func(e Event) { got = append(got, e) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("read %d events, want 3", len(got))
	}
	want := []struct {
		what, user string
		code       int
		write      bool
		node       string
	}{
		{"patch configmaps fleet-role/server-1", "system:serviceaccount:fleet-role:fleet-role-probe", 200, true, "server-1"},
		{"patch servicecidrs /kubernetes/status", "system:apiserver", 200, true, ""},
		{"create configmaps fleet-role/server-2", "system:serviceaccount:fleet-role:fleet-role-probe", 403, true, "server-1"},
	}
	for i, w := range want {
		e := got[i]
		if e.What() != w.what || e.User.Username != w.user || e.Code() != w.code || e.IsWrite() != w.write || e.Stage != "ResponseComplete" {
			t.Errorf("event %d: %q by %s, code %d, write %v, stage %s; want %q by %s, code %d, write %v, ResponseComplete",
				i+1, e.What(), e.User.Username, e.Code(), e.IsWrite(), e.Stage, w.what, w.user, w.code, w.write)
		}
		var node string
		if n := e.User.Extra["authentication.kubernetes.io/node-name"]; len(n) == 1 {
			node = n[0]
		}
		if node != w.node {
			t.Errorf("event %d: node claim %q, want %q", i+1, node, w.node)
		}
	}
	at := time.Date(2026, 12, 1, 15, 41, 24, 720080000, time.UTC)
	if !got[0].StageTimestamp.Equal(at) {
		t.Errorf("event 1 at %s, want %s", got[0].StageTimestamp, at)
	}
}

func TestEventWithoutObjectOrResponse(t *testing.T) {
	e := Event{Verb: "get"}
	if e.What() != "get" || e.Code() != 0 || e.IsWrite() {
		t.Errorf("%+v: what %q, code %d, write %v; want get, 0, false", e, e.What(), e.Code(), e.IsWrite())
	}
	for _, v := range WriteVerbs {
		if !(Event{Verb: v}).IsWrite() {
			t.Errorf("%s is not a write", v)
		}
	}
	for _, v := range []string{"get", "list", "watch"} {
		if (Event{Verb: v}).IsWrite() {
			t.Errorf("%s is a write", v)
		}
	}
}

// A line that is not an event fails the read and names the line; a
// missing file fails it too.
func TestReadErrors(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "audit.log")
	good, err := os.ReadFile(filepath.Join("testdata", "k3s-audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, append(good, "not json\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	n := 0
	err = Read(p, func(Event) { n++ })
	if err == nil || !strings.Contains(err.Error(), "line 4") {
		t.Errorf("a bad 4th line: %v, want an error naming line 4", err)
	}
	if n != 3 {
		t.Errorf("%d events before the bad line, want 3", n)
	}
	if err := Read(filepath.Join(dir, "missing"), func(Event) {}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing log: %v, want a not-exist error", err)
	}
	// A line longer than maxLine fails rather than being cut.
	if err := os.WriteFile(p, []byte(strings.Repeat("x", maxLine+1)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Read(p, func(Event) {}); err == nil {
		t.Errorf("a line of %d bytes was read", maxLine+1)
	}
}

// An Event on a Node is a create or patch of an events object in namespace
// default named after the node and a suffix; another namespace, another
// resource, another node's name that only begins alike, or a read is not.
func TestEventOnNode(t *testing.T) {
	ev := func(verb, resource, ns, name string) Event {
		var e Event
		e.Verb = verb
		e.ObjectRef = &struct {
			Resource    string `json:"resource"`
			Namespace   string `json:"namespace"`
			Name        string `json:"name"`
			Subresource string `json:"subresource"`
		}{Resource: resource, Namespace: ns, Name: name}
		return e
	}
	nodes := []string{"server-1", "standby"}
	for _, c := range []struct {
		e    Event
		want bool
	}{
		{ev("create", "events", "default", "server-1.18ed34aaf3dad46a"), true},
		{ev("patch", "events", "default", "standby.18ed34ba8d55b7c4"), true},
		{ev("get", "events", "default", "server-1.18ed34aaf3dad46a"), false},
		{ev("create", "events", "fleet-role", "server-1.18ed34aaf3dad46a"), false},
		{ev("create", "configmaps", "default", "server-1.x"), false},
		{ev("create", "events", "default", "server-10.18ed34aaf3dad46a"), false},
		{Event{Verb: "create"}, false},
	} {
		if got := c.e.EventOnNode(nodes); got != c.want {
			t.Errorf("%s: EventOnNode = %v, want %v", c.e.What(), got, c.want)
		}
	}
}
