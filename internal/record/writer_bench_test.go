package record_test

import (
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/record"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
)

// BenchmarkWriterPlan is what the tail layout adds to a probe's period: the
// plan of one write of a voter's full window, a period on from its
// snapshot (the probe's encoding of the window itself not counted).
func BenchmarkWriterPlan(b *testing.B) {
	voters := []string{"server-1", "server-2", "server-3"}
	all := testkit.RealisticEntry("server-2", voters, 1, 200, 15*time.Second, time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC))
	texts := make([]string, 0, 100)
	for k := range 100 {
		e := all
		e.Samples = all.Samples[k : k+100]
		text, err := entry.Encode(e)
		if err != nil {
			b.Fatal(err)
		}
		texts = append(texts, text)
	}
	var w record.Writer
	i := 0
	kinds := map[record.Kind]int{}
	for b.Loop() {
		p := w.Plan(texts[i%len(texts)])
		w.Wrote(p)
		kinds[p.Kind]++
		i++
		if i%len(texts) == 0 {
			w.Forget()
		}
	}
	b.ReportMetric(float64(kinds[record.KindTail])/float64(max(1, i)), "tails/op")
}
