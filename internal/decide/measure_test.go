package decide

import (
	"testing"

	"github.com/fleet-role/fleet-role/internal/status"
)

// The document tells a measured signal from the evidence that a host can
// be judged by its name alone (status.IsMeasure); it must say what each
// kind says of itself.
func TestMeasuresAgreeWithTheDocument(t *testing.T) {
	for k := kindEntry; k <= kindReadingErrors; k++ {
		if got := status.IsMeasure(signalOf[k]); got != k.isMeasure() {
			t.Errorf("%s: the document says measure %v, the kind %v", signalOf[k], got, k.isMeasure())
		}
	}
}
