package entry_test

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/quantile"
)

// agree decodes text with the format's own reader and the reflective one
// it replaced, at l, and fails unless both refuse it or both read the same
// entry.
func agree(t testing.TB, text string, l entry.Limits) {
	t.Helper()
	got, err := entry.DecodeLimited(text, l)
	want, werr := entry.DecodeReflective(text, l)
	switch {
	case (err == nil) != (werr == nil):
		t.Fatalf("the readers disagree: reader %v, reflective reader %v\n%.2000s", err, werr, text)
	case err == nil && !reflect.DeepEqual(got, want):
		t.Fatalf("the readers read different entries\nreader     %+v\nreflective %+v\n%.2000s", got, want, text)
	}
}

// seedTexts are the entries the differential tests start from: real
// shapes (voters and standbys, failing readings, an empty entry, the worst
// legitimate entry), every hostile shape, the fuzz corpus, and texts that
// take the reader's rare paths (escapes, bytes that are not UTF-8, nulls
// where encoding/json reads nothing).
func seedTexts(t testing.TB) []string {
	var out []string
	for _, e := range []entry.Entry{worstWindow("n", voterNames(3), 1, 5), worstWindow("n", voterNames(2), -1, 3), {Node: "n"},
		worstWindow("n", voterNames(5), 0, 100), worstWindow("n", voterNames(5), -1, 100), entry.WorstCase(100, 5)} {
		out = append(out, encode(t, e))
	}
	for _, h := range hostileShapes(t) {
		if len(h.text) < 2<<20 {
			out = append(out, h.text)
		}
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzDecode", "*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		_, lit, _ := strings.Cut(string(b), "string(")
		s, err := strconv.Unquote(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(lit), ")")))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, s)
	}
	small := `{"v":1,"node":"n","n":1,"t0":"2026-01-01T00:00:00.000Z","dt_ms":[0],"link":[{"if":"e","class":"wired","n":1}],"mem_total_kib":[[1,1]],"mem_available_kib":[1]`
	for _, tail := range []string{
		`}`,
		`,"strings":["a\u00e9\n\"\\\/","\ud800x","\xff\xfe"],"errors":[[0,0],[0,1],[0,2]]}`,
		`,"strings":[null],"errors":[[0,0]]}`,
		`,"restart":[null]}`,
		`,"restart":[-0]}`,
		`,"mem_full_stall_us":[null]}`,
		`,"mem_full_stall_us":[]}`,
		`,"mem_full_stall_us":null}`,
		`,"wakeup_late_us":[null]}`,
		`,"wakeup_late_us":[]}`,
		`,"wakeup_late_us":null}`,
		`,"wakeup_late_us":[-0]}`,
		`,"wakeup_late_us":[9007199254740993]}`,
		`,"wakeup_late_us":[1,2]}`,
		`,"mem_full_stall_us":[7],"wakeup_late_us":[812345]}`,
		`,"connect_us":{"a":null}}`,
		`,"connect_us":{}}`,
		`,"connect_fail":null}`,
		`,"etcd":null,"fsync":null}`,
		`,"fsync":{"at":"2026-01-01T00:00:00Z","dir":null,"measured_disk":null,"writes":-0,"p99_us":1,"max_us":2}}`,
		`,"fsync":{"at":"2026-01-01T00:00:00Z","measured_disk":"true"}}`,
		`,"shrunk":01}`,
		`,"shrunk":1.0}`,
		`,"shrunk":-0}`,
		`,"shrunk":1e0}`,
		`,"refused":"x\u0000"}`,
		`,"withheld":"y\u0000"}`,
		`}` + "\n\t ",
		`}x`,
		`,"node":"n"}`,
		`,"V":1}`,
		`,"strings":["` + "\x01" + `"]}`,
		`,"strings":["\x"]}`,
		`,"strings":["\u12"]}`,
	} {
		out = append(out, small+tail)
	}
	out = append(out, `null`, ` `, ``, `{}`, `[]`, `"x"`, `1`, `{"v":1,"node":"\u006e","n":0,"dt_ms":[]}`, `{"v":1,"node":"n","n":0,"dt_ms":[],"link":[null]}`,
		`{"v":1,"node":"n","n":0,"dt_ms":[],"etcd":{"bounds":{"wal_fsync":[]},"peer_rtt":{},"member_id":[null]}}`,
		`{"v":1,"node":"n","n":0,"dt_ms":[],"etcd":{"bounds":{"wal_fsync":[null]}}}`,
		`{"v":1,"node":"n","n":0,"dt_ms":[],"etcd":{"bounds":null}}`)
	return out
}

// The format's reader and the reflective reader it replaced agree on every
// seed, at the default settings' limits and at Decode's.
func TestReadersAgreeOnSeeds(t *testing.T) {
	for _, text := range seedTexts(t) {
		agree(t, text, limits)
		agree(t, text, entry.LimitsFor(10_000, 7))
	}
}

// They agree on random changes of real entries: bytes replaced, removed,
// repeated, or JSON's own characters put in.
func TestReadersAgreeOnMutations(t *testing.T) {
	seeds := seedTexts(t)
	rnd := rand.New(rand.NewPCG(14, 14))
	const alphabet = `{}[],:"\ -0123456789.eEnulltruefalse`
	rounds := 5_000
	if testing.Short() {
		rounds = 500
	}
	for range rounds {
		b := []byte(seeds[rnd.IntN(len(seeds))])
		for range 1 + rnd.IntN(3) {
			if len(b) == 0 {
				break
			}
			i := rnd.IntN(len(b))
			switch rnd.IntN(4) {
			case 0:
				b[i] = alphabet[rnd.IntN(len(alphabet))]
			case 1:
				b = append(b[:i], b[i+1:]...)
			case 2:
				j := min(len(b), i+1+rnd.IntN(20))
				b = append(b[:j], append(append([]byte{}, b[i:j]...), b[j:]...)...)
			case 3:
				b = append(b[:i], append([]byte{alphabet[rnd.IntN(len(alphabet))]}, b[i:]...)...)
			}
		}
		agree(t, string(b), limits)
	}
}

// FuzzReadersAgree: on any text, the reader and the reflective reader both
// refuse it or read the same entry.
func FuzzReadersAgree(f *testing.F) {
	for _, text := range seedTexts(f) {
		f.Add(text)
	}
	f.Fuzz(func(t *testing.T, text string) {
		agree(t, text, limits)
	})
}

// DecodeByVoter refuses what DecodeLimited refuses, and its entry with the
// maps filled from its columns is DecodeLimited's.
func TestDecodeByVoterIsDecodeLimited(t *testing.T) {
	for _, text := range seedTexts(t) {
		want, werr := entry.DecodeLimited(text, limits)
		got, cols, err := entry.DecodeByVoter(text, limits)
		if (err == nil) != (werr == nil) {
			t.Fatalf("DecodeByVoter %v, DecodeLimited %v\n%.2000s", err, werr, text)
		}
		if err != nil {
			continue
		}
		for _, s := range got.Samples {
			if s.Connect != nil {
				t.Fatal("DecodeByVoter made a sample's Connect map")
			}
		}
		entry.FillConnects(got.Samples, cols)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("DecodeByVoter and FillConnects\n%+v\nDecodeLimited\n%+v", got, want)
		}
	}
}

// A Decoder reads every text as DecodeByVoter does, one after another in
// the memory it reuses, whatever it read before (refused texts among
// them); and what DecodeKeptByVoter read, but its histograms, is unchanged
// by the decodes after it.
func TestDecoderIsDecodeByVoter(t *testing.T) {
	texts := seedTexts(t)
	var d entry.Decoder
	type kept struct {
		text string
		e    entry.Entry
		cols map[string]*entry.Connects
	}
	var keep []kept
	read := 0
	for round := range 2 {
		for i, text := range texts {
			want, wantCols, werr := entry.DecodeByVoter(text, limits)
			var got entry.Entry
			var cols map[string]*entry.Connects
			var err error
			if i%3 == round {
				got, cols, err = d.DecodeKeptByVoter(text, limits)
			} else {
				got, cols, err = d.DecodeByVoter(text, limits)
			}
			if (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() {
				t.Fatalf("Decoder: %v, DecodeByVoter: %v\n%.2000s", err, werr, text)
			}
			if err != nil {
				continue
			}
			read++
			if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(cols, wantCols) {
				t.Fatalf("Decoder read\n%+v\n%+v\nDecodeByVoter\n%+v\n%+v", got, cols, want, wantCols)
			}
			if i%3 == round {
				keep = append(keep, kept{text, got, cols})
			}
		}
	}
	if read < 4 || len(keep) < 2 {
		t.Fatalf("%d texts read, %d kept: too few seeds to tell", read, len(keep))
	}
	// The histograms, valid until the next decode, aside.
	noHists := func(e entry.Entry) {
		for _, x := range e.Samples {
			if x.Etcd != nil {
				x.Etcd.WALFsync, x.Etcd.BackendCommit, x.Etcd.PeerRTT = quantile.Histogram{}, quantile.Histogram{}, nil
			}
		}
	}
	for _, k := range keep {
		want, wantCols, _ := entry.DecodeByVoter(k.text, limits)
		noHists(k.e)
		noHists(want)
		if !reflect.DeepEqual(k.e, want) || !reflect.DeepEqual(k.cols, wantCols) {
			t.Fatalf("a kept entry changed under the decodes after it\n%+v\nwant\n%+v", k.e, want)
		}
	}
}
