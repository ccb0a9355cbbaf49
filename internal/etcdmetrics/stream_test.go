package etcdmetrics

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// readKept, reading a page as it arrives, keeps what keepFamilies keeps of
// it held whole, byte for byte: on every captured page and on pages made to
// try its edges (a kept line longer than its buffer, a removed member's
// series, a known member named on the page's first line, garbage, no
// final newline), read whole, a byte at a time and in odd pieces.
func TestReadKeptKeepsWhatKeepFamiliesKeeps(t *testing.T) {
	pages := capturedPages(t)
	leader := string(pages["leader.prom"])
	long := metricPeerRTT + `_bucket{To="` + strings.Repeat("a", 3*lineBufferBytes) + `",le="0.1"} 3` + "\n"
	pages["a kept line three buffers long"] = []byte(leader + long)
	pages["a dropped line three buffers long"] = []byte(`go_gc_info{x="` + strings.Repeat("b", 3*lineBufferBytes) + "\"} 1\n" + leader)
	pages["a line exactly the buffer"] = []byte(metricPeerRTT + `_count{To="` + strings.Repeat("c", lineBufferBytes-len(metricPeerRTT)-len(`_count{To="`)-len("\"} 1\n")) + "\"} 1\n" + leader)
	pages["known peers on the first line"] = []byte(metricKnownPeers + `{Local="1",Remote="2"} 1` + "\n" + metricPeerRTT + `_count{To="2"} 1` + "\n" + metricPeerRTT + `_count{To="3"} 1` + "\n" + metricKnownPeers + `{Local="1",Remote="4"} 1` + "\n")
	pages["a removed member"] = []byte("# HELP x\n" + metricKnownPeers + `{Local="1",Remote="2"} 0` + "\n" + metricPeerRTT + `_count{To="2"} 1` + "\n")
	pages["garbage"] = []byte("not the text format at all\n\x00\x01\n" + leader)
	pages["no final newline"] = []byte(strings.TrimSuffix(leader, "\n"))
	pages["a wanted family last, no newline"] = []byte(leader + metricIsLeader + " 1")
	pages["empty"] = nil
	pages["blank lines"] = []byte("\n\n\r\n \n")
	for name, page := range pages {
		want := keepFamilies(page)
		for _, how := range []struct {
			name string
			r    func() io.Reader
		}{
			{"whole", func() io.Reader { return bytes.NewReader(page) }},
			{"a byte at a time", func() io.Reader { return iotest.OneByteReader(bytes.NewReader(page)) }},
			{"in pieces of 1,000", func() io.Reader { return &pieces{b: page, n: 1000} }},
		} {
			got, n, err := readKept(how.r())
			if err != nil {
				t.Fatalf("%s, %s: %v", name, how.name, err)
			}
			if n != int64(len(page)) {
				t.Errorf("%s, %s: read %d bytes of %d", name, how.name, n, len(page))
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s, %s: kept %d bytes, keepFamilies %d:\n%.300q\nagainst\n%.300q", name, how.name, len(got), len(want), got, want)
			}
		}
	}
}

// Past MaxKeptBytes of lines no second pass can drop, both keep over it
// (and the page is refused); readKept keeps no more than a line past it,
// and reads on to the cap, so that a page over the cap is refused as one.
func TestReadKeptPastMaxKeptBytes(t *testing.T) {
	for _, c := range []struct {
		name string
		size int
	}{{"at", MaxKeptBytes}, {"just over", MaxKeptBytes + 1}, {"a page's worth", MaxPageBytes}, {"over the page's cap", 2 * MaxPageBytes}} {
		line := metricServerID + `{server_id="1"} 1` + "\n"
		page := []byte(strings.Repeat(line, c.size/len(line)+1)[:c.size])
		want := keepFamilies(page)
		got, n, err := readKept(bytes.NewReader(page))
		if err != nil {
			t.Fatal(err)
		}
		if n != min(int64(c.size), MaxPageBytes+1) {
			t.Errorf("%s: read %d of %d bytes", c.name, n, c.size)
		}
		if wantOver, gotOver := len(want) > MaxKeptBytes, len(got) > MaxKeptBytes; wantOver != gotOver || !wantOver && !bytes.Equal(got, want) {
			t.Errorf("%s: kept %d bytes, keepFamilies %d", c.name, len(got), len(want))
		}
		if len(got) > MaxKeptBytes+lineBufferBytes {
			t.Errorf("%s: kept %d bytes, more than a line past %d", c.name, len(got), MaxKeptBytes)
		}
	}
}

// A page over the cap is read to one byte past it, no further, and said so.
func TestReadKeptStopsPastTheCap(t *testing.T) {
	for _, c := range []struct {
		name string
		size int
		want int64
	}{{"at", MaxPageBytes, MaxPageBytes}, {"under", MaxPageBytes - 1, MaxPageBytes - 1}, {"over", MaxPageBytes + 1, MaxPageBytes + 1}, {"far over", 4 * MaxPageBytes, MaxPageBytes + 1}} {
		page := bytes.Repeat([]byte("go_x 1\n"), c.size/7+1)[:c.size]
		_, n, err := readKept(bytes.NewReader(page))
		if err != nil || n != c.want {
			t.Errorf("%s the cap (%d bytes): read %d, %v; want %d", c.name, c.size, n, err, c.want)
		}
	}
}

// A read that fails is said so, with nothing kept.
func TestReadKeptFails(t *testing.T) {
	boom := io.ErrUnexpectedEOF
	kept, _, err := readKept(io.MultiReader(strings.NewReader(metricIsLeader+" 1\n"), iotest.ErrReader(boom)))
	if err != boom || kept != nil {
		t.Errorf("kept %q, %v; want nothing and %v", kept, err, boom)
	}
}

// pieces reads b n bytes at most at a time.
type pieces struct {
	b []byte
	n int
}

func (p *pieces) Read(out []byte) (int, error) {
	if len(p.b) == 0 {
		return 0, io.EOF
	}
	k := copy(out[:min(len(out), p.n)], p.b)
	p.b = p.b[k:]
	return k, nil
}
