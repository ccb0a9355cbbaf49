package deflate_test

import (
	"bytes"
	"compress/flate"
	"io"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/fleet-role/fleet-role/internal/deflate"
)

// What this writer writes, compress/flate's reader reads back exactly,
// primed with the same dictionary or none, at every level, for inputs from
// empty to several of its windows (random bytes, text with repeats at and
// past its window's reach); and at the best compression it packs a
// JSON-like text within a few percent of compress/flate's.
func TestRoundTripThroughCompressFlate(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	dict := []byte(`{"v":1,"node":"server-2","n":2,"t0":"2026-12-06T00:00:00.011Z","dt_ms":[0,15013],"connect_us":{"server-1":[703,602]}}`)
	text := func(n int) []byte {
		var b bytes.Buffer
		for b.Len() < n {
			b.WriteString(`{"server-`)
			b.WriteByte(byte('0' + rng.IntN(10)))
			b.WriteString(`":[`)
			for range 1 + rng.IntN(8) {
				b.WriteString(string(rune('0' + rng.IntN(10))))
				b.WriteString("123,")
			}
			b.WriteString(`]}`)
		}
		return b.Bytes()[:n]
	}
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	for _, n := range []int{0, 1, 100, 8191, 8192, 8193, 20000, 70000, 300000} {
		for _, in := range [][]byte{text(n), random(n)} {
			for _, level := range []int{deflate.NoCompression, deflate.BestSpeed, 2, 6, deflate.BestCompression, deflate.HuffmanOnly} {
				for _, d := range [][]byte{nil, dict} {
					var out bytes.Buffer
					w, err := deflate.NewWriterDict(&out, level, d)
					if err != nil {
						t.Fatal(err)
					}
					if _, err := w.Write(in); err != nil {
						t.Fatal(err)
					}
					if err := w.Close(); err != nil {
						t.Fatal(err)
					}
					got, err := io.ReadAll(flate.NewReaderDict(bytes.NewReader(out.Bytes()), d))
					if err != nil || !bytes.Equal(got, in) {
						t.Fatalf("%d bytes at level %d (dictionary %v): read back %d bytes, %v", n, level, d != nil, len(got), err)
					}
				}
			}
		}
	}
	in := text(20000)
	var ours, theirs bytes.Buffer
	w, _ := deflate.NewWriterDict(&ours, deflate.BestCompression, dict)
	w.Write(in)
	w.Close()
	fw, _ := flate.NewWriterDict(&theirs, flate.BestCompression, dict)
	fw.Write(in)
	fw.Close()
	t.Logf("20,000 bytes of text: %d bytes packed here, %d by compress/flate", ours.Len(), theirs.Len())
	if float64(ours.Len()) > 1.05*float64(theirs.Len()) {
		t.Errorf("packed to %d bytes, more than 5%% over compress/flate's %d", ours.Len(), theirs.Len())
	}
}

// A writer holds about 100 KB, where compress/flate's holds about 780 KB.
func TestWriterIsSmall(t *testing.T) {
	allocs := func(f func()) uint64 {
		var a, b runtime.MemStats
		runtime.ReadMemStats(&a)
		f()
		runtime.ReadMemStats(&b)
		return b.TotalAlloc - a.TotalAlloc
	}
	ours := allocs(func() { deflate.NewWriterDict(io.Discard, deflate.BestCompression, []byte("x")) })
	theirs := allocs(func() { flate.NewWriterDict(io.Discard, flate.BestCompression, []byte("x")) })
	t.Logf("a writer allocates %d KB here, %d KB in compress/flate", ours/1024, theirs/1024)
	if ours > 160<<10 || ours*4 > theirs {
		t.Errorf("a writer allocates %d bytes, want at most 160 KB and a quarter of compress/flate's %d", ours, theirs)
	}
}
