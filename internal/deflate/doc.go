// Package deflate is the writer of Go's compress/flate (go1.26.8's,
// copied; its reader reads what this writes) with tables sized for
// fleet-role's entries rather than for streams (deflate.go's constants).
//
// Why a copy: compress/flate's writer holds about 780 KB whatever it
// compresses (its hash tables are arrays of its struct). The probe packs
// its record each period (internal/record); kept between periods, that
// writer was live at every collection, and made afresh it was 780 KB of
// large objects each time: either way about 2 MiB of the probe's resident
// memory (docs/performance.md, "The probe's memory"), where this one holds
// about 100 KB. The output is RFC 1951 DEFLATE, which compress/flate's
// reader reads, primed with the same dictionary (a test holds it).
package deflate

// InternalError reports an error in the writer's own code (compress/flate
// defines it with its reader, which is not copied).
type InternalError string

func (e InternalError) Error() string { return "deflate: internal error: " + string(e) }

// maxNumLit is DEFLATE's count of literal and length codes (RFC 1951,
// 3.2.5), which compress/flate defines with its reader.
const maxNumLit = 286
