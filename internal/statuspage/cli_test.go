package statuspage_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleet-role/fleet-role/internal/cli"
	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/fleet-role/fleet-role/internal/statuspage"
)

// fleet-role decide -o html writes the page of the decision it makes: the
// same page as rendered from the golden scenario's status document.
func TestDecideWritesThePage(t *testing.T) {
	dir := filepath.Join("..", "decide", "testdata", "slow-voter-link")
	now, err := os.ReadFile(filepath.Join(dir, "now"))
	if err != nil {
		t.Fatal(err)
	}
	probe, nodes := filepath.Join(dir, "records.json"), filepath.Join(dir, "nodes.json")
	var out, errb bytes.Buffer
	args := []string{"decide", "--probe", probe, "--nodes", nodes, "--previous", filepath.Join(dir, "previous.json"),
		"--now", strings.TrimSpace(string(now)), "-o", "html"}
	// The scenario's decision is a swap: exit 1, an answer, not an error.
	if code := cli.Main(args, &out, &errb); code != cli.StatusExitSwap || errb.Len() > 0 {
		t.Fatalf("fleet-role %s: exit %d, want %d\n%s", strings.Join(args, " "), code, cli.StatusExitSwap, errb.String())
	}
	b, err := os.ReadFile(filepath.Join(dir, "status.json"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := status.UnmarshalStatus(b)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := statuspage.Render(&want, statuspage.Page{Model: statuspage.ModelOf(st), Source: "fleet-role decide, from " + probe + " and " + nodes}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), want.Bytes()) {
		t.Fatalf("fleet-role decide -o html differs from the page of status.json")
	}
	if !bytes.Contains(out.Bytes(), []byte(`<span id="tolerance-value">0</span>`)) || !bytes.Contains(out.Bytes(), []byte("would swap <b>bravo</b> out for <b>delta</b>")) {
		t.Fatalf("the page lacks the tolerance or the swap:\n%s", out.String())
	}
}
