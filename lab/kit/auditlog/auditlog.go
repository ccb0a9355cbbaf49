// Package auditlog reads a kube-apiserver's audit log (one audit.k8s.io/v1
// Event a line, as --audit-log-path writes it): the scenarios hold from it
// who wrote what, since the API server records every request whoever makes
// it, fleet-role's components and the cluster's own alike.
package auditlog

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"
)

// Event is the part of an audit.k8s.io/v1 Event the scenarios read.
type Event struct {
	Stage      string `json:"stage"`
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	UserAgent  string `json:"userAgent"`
	User       struct {
		Username string              `json:"username"`
		Extra    map[string][]string `json:"extra"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	StageTimestamp time.Time `json:"stageTimestamp"`
}

// WriteVerbs are the verbs that change an object.
var WriteVerbs = []string{"create", "update", "patch", "delete", "deletecollection"}

// DryRun says whether the request was a server-side dry run, which changes
// nothing (the probe's check that the admission policy is enforced).
func (e Event) DryRun() bool {
	u, err := url.Parse(e.RequestURI)
	return err == nil && u.Query().Has("dryRun")
}

// IsWrite says whether the event is a request that changes an object.
func (e Event) IsWrite() bool { return slices.Contains(WriteVerbs, e.Verb) }

// Code is the response's status code, 0 when the event has none.
func (e Event) Code() int {
	if e.ResponseStatus == nil {
		return 0
	}
	return e.ResponseStatus.Code
}

// What names the request: its verb and the object it is on.
func (e Event) What() string {
	r := e.ObjectRef
	if r == nil {
		return e.Verb
	}
	s := fmt.Sprintf("%s %s %s/%s", e.Verb, r.Resource, r.Namespace, r.Name)
	if r.Subresource != "" {
		s += "/" + r.Subresource
	}
	return s
}

// maxLine is the longest line read: an event at the Metadata level holds
// no object, so a line is a few KiB at most.
const maxLine = 1 << 20

// Read calls fn with every event of the audit log at path, in order.
func Read(path string, fn func(Event)) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for n := 1; sc.Scan(); n++ {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return fmt.Errorf("audit log %s, line %d: %w", path, n, err)
		}
		fn(e)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("audit log %s: %w", path, err)
	}
	return nil
}

// EventOnNode says whether e is a create or patch of an Event on one of
// nodes, as fleet-role's controller records them (docs/operators.md): in
// namespace default, where `kubectl describe node` finds them, each named
// by client-go's recorder after the object it is on and a suffix.
func (e Event) EventOnNode(nodes []string) bool {
	r := e.ObjectRef
	if r == nil || r.Resource != "events" || r.Namespace != "default" || (e.Verb != "create" && e.Verb != "patch") {
		return false
	}
	return slices.ContainsFunc(nodes, func(n string) bool { return strings.HasPrefix(r.Name, n+".") })
}
