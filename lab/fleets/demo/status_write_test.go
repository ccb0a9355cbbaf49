package demo

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/fleet-role/fleet-role/internal/status"
)

// Two demos writing the status at once (tests on one machine) both succeed,
// the file holds a whole document, and no temporary file is left.
func TestWriteStatusConcurrently(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "status.json")
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				errs <- writeStatus(path, &status.Status{})
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil || !json.Valid(b) {
		t.Fatalf("status: %q, %v", b, err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*.tmp"))
	if len(left) > 0 {
		t.Fatalf("left behind: %v", left)
	}
}
