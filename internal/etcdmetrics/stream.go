package etcdmetrics

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// lineBufferBytes is the most of one line readKept holds before deciding
// whether to keep it: a line's family is named in its first bytes (the
// longest family name etcd serves is under 60 bytes, its longest line 241),
// so a line longer than this is decided by its start like any other, and
// read on in pieces of this size.
const lineBufferBytes = 4 << 10

// readKept reads a metrics page from r and returns what keepFamilies keeps
// of it, as it arrives, never holding the page whole: the probe's scrape
// read each page (about 170 KB) into a buffer of its own, garbage at every
// sample, where the lines it keeps take about 10 KB. It reads at most
// MaxPageBytes+1 bytes of r and says how many it read, so that the caller
// refuses a page over the cap as before.
//
// The result is keepFamilies's, byte for byte (a test holds it on every
// captured page and on pages made to try it), where that fits
// MaxKeptBytes; where it does not, both are over it and the page is
// refused. A line whose first lineBufferBytes are blanks is decided by
// them, as a comment or blank line is. The families' lines are kept in a first pass, with every
// member's series, and the series of members no longer in the cluster
// dropped from them in a second, once the known members
// (etcd_network_known_peers, itself a kept family) are all read. What the
// first pass keeps is bounded by the page's cap, as the page was.
func readKept(r io.Reader) (kept []byte, read int64, err error) {
	cr := &countingReader{r: io.LimitReader(r, MaxPageBytes+1)}
	br := bufio.NewReaderSize(cr, lineBufferBytes)
	// out starts with the newline before the first kept line, by which
	// knownIDs finds a series' start; none when that line is the page's
	// first, which has none before it.
	out := make([]byte, 1, 16<<10)
	out[0] = '\n'
	sentinel, first, atStart, keeping, droppable := true, true, true, false, false
	// fixed is what the kept lines that the second pass cannot drop take
	// (those of no peer's series): past MaxKeptBytes the page is refused
	// whatever the second pass does, and nothing more is kept, only read
	// to the cap, so that a page over it is still refused as one.
	fixed := 0
	for {
		chunk, rerr := br.ReadSlice('\n')
		if len(chunk) > 0 {
			if atStart {
				// A line that is no sample of any metric is kept, so that
				// a page that is not the text format at all still fails to
				// parse (as keepFamilies).
				fam := familyOf(chunk)
				keeping = wanted[string(fam)] || !looksLikeSample(chunk)
				_, peer := peerLabels[string(fam)]
				droppable = peer && chunk[0] != '#'
				if keeping && first {
					out, sentinel = out[:0], false
				}
				first = false
			}
			if keeping && fixed <= MaxKeptBytes {
				out = grow(out, len(chunk))
				out = append(out, chunk...)
				if !droppable {
					fixed += len(chunk)
				}
			}
			atStart = chunk[len(chunk)-1] == '\n'
		}
		if rerr == nil || errors.Is(rerr, bufio.ErrBufferFull) {
			continue
		}
		if rerr != io.EOF {
			return nil, cr.n, rerr
		}
		break
	}
	known := knownIDs(out)
	if sentinel {
		out = out[1:]
	}
	out = dropUnknownPeers(out, known)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	return out, cr.n, nil
}

// grow makes room for n more bytes in b, doubling: append's own growth is
// a quarter at a time past 256 KB, which would allocate four times a
// megabyte page's lines on the way to holding them.
func grow(b []byte, n int) []byte {
	if len(b)+n <= cap(b) {
		return b
	}
	g := make([]byte, len(b), max(2*cap(b), len(b)+n))
	copy(g, b)
	return g
}

// dropUnknownPeers removes from kept, in place, the lines of peerLabels'
// series that name a member known does not hold (keepFamilies's rule).
func dropUnknownPeers(kept []byte, known map[string]bool) []byte {
	if known == nil {
		return kept
	}
	w := 0
	for rest := kept; len(rest) > 0; {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i+1], rest[i+1:]
		} else {
			rest = nil
		}
		if l, ok := peerLabels[string(familyOf(line))]; ok && line[0] != '#' {
			if id := labelIn(line, l); id != "" && id != "0" && !known[id] {
				continue
			}
		}
		w += copy(kept[w:], line)
	}
	return kept[:w]
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
