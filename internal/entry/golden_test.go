package entry_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fleet-role/fleet-role/internal/entry"
)

// Records hold entries of format v1 already written, so its bytes are
// fixed: Encode writes these entries byte for byte as the encoder before
// the column table did (testdata/v1 holds its output, from 86e2ffd), and
// each reads back to the entry that encodes to the same bytes.
func TestEncodingIsVersionOne(t *testing.T) {
	voters := voterNames(5)
	for name, e := range map[string]entry.Entry{
		"voter":   worstWindow(voters[0], voters, 0, 100),
		"standby": worstWindow("k3s-node-99.fleet.example.internal", voters, -1, 100),
		"worst":   entry.WorstCase(3, 3),
		"empty":   {Node: "n", Shrunk: 2, Refused: "x & y", Withheld: "<z>"},
	} {
		want, err := os.ReadFile(filepath.Join("testdata", "v1", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := entry.Encode(e)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got != string(want) {
			t.Errorf("%s: Encode wrote %d bytes that differ from v1's %d", name, len(got), len(want))
		}
		back, err := entry.Decode(string(want))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if again, err := entry.Encode(back); err != nil || again != string(want) {
			t.Errorf("%s: read back and written again, %d bytes that differ from v1's %d (%v)", name, len(again), len(want), err)
		}
	}
}
