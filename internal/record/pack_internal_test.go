package record

import (
	"bytes"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/fleet-role/fleet-role/internal/deflate"
)

// A pooled writer, reset between packs, packs each text to the very bytes
// a writer made for it would: a snapshot's base is the hash of its packed
// bytes, and what one pack leaves in a writer (its window, its hash
// chains) must not reach the next. Packs run from two goroutines at once,
// as the probe's and a test's might, under the race detector in CI.
func TestPooledPackerPacksAsAFreshOne(t *testing.T) {
	texts := []string{
		"",
		`{"node":"n","samples":[]}`,
		strings.Repeat(`{"at":"2026-12-07T00:00:00Z","mem":[1,2,3]}`, 400), // past the 8 KB window
		dictionary,
		strings.Repeat("x", 70000),
		`{"node":"other"}`,
	}
	fresh := func(text string) []byte {
		var b bytes.Buffer
		w, err := deflate.NewWriterDict(&b, deflate.BestCompression, []byte(dictionary))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(w, text)
		_ = w.Close()
		return b.Bytes()
	}
	want := make([][]byte, len(texts))
	for i, text := range texts {
		want[i] = fresh(text)
	}
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Go(func() {
			for round := range 5 {
				for k := range texts {
					i := (k*(g+1) + round) % len(texts) // a different order each round and goroutine
					if got := Pack(texts[i]); !bytes.Equal(got, want[i]) {
						t.Errorf("goroutine %d round %d: text %d (%d bytes) packed to %d bytes, a fresh writer to %d", g, round, i, len(texts[i]), len(got), len(want[i]))
					}
				}
			}
		})
	}
	wg.Wait()
}
