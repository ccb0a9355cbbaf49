package status

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// The indented size is counted as json.Indent writes it, so that Marshal
// may skip building an indented document that does not fit: on every
// shape JSON has (empty and nested containers, escapes and brackets inside
// strings) and on every golden scenario's status (internal/decide's
// testdata), whole, with a host's worth of hosts repeated to a large
// fleet's size, and with its texts shared.
func TestIndentedLenIsIndent(t *testing.T) {
	docs := []string{`{}`, `[]`, `{"a":[]}`, `{"a":{}}`, `[[],[{}],{"b":[1,2,{"c":null}]}]`, `"x"`, `1`,
		`{"s":"a\"b\\c{[,:]}","t":["\u00e9\\\"",true,false]}`, `{"a":{"b":{"c":{"d":[0]}}}}`}
	goldens, err := filepath.Glob("../decide/testdata/*/status.json")
	if err != nil || len(goldens) == 0 {
		t.Fatalf("no golden statuses: %v", err)
	}
	for _, g := range goldens {
		b, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		st, err := UnmarshalStatus(b)
		if err != nil {
			t.Fatalf("%s: %v", g, err)
		}
		for len(st.Hosts) > 0 && len(st.Hosts) < 150 {
			st.Hosts = append(st.Hosts, st.Hosts...)
		}
		for _, shared := range []bool{false, true} {
			if shared {
				st.share()
			}
			c, err := compact(st)
			if err != nil {
				t.Fatal(err)
			}
			docs = append(docs, string(c))
		}
	}
	for _, d := range docs {
		var c bytes.Buffer
		if err := json.Compact(&c, []byte(d)); err != nil {
			t.Fatalf("not JSON: %v: %.200s", err, d)
		}
		if got, want := indentedLen(c.Bytes()), len(indent(c.Bytes())); got != want {
			t.Fatalf("indentedLen %d, indent writes %d bytes: %.200s", got, want, d)
		}
	}
}
