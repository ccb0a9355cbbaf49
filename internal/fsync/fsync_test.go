package fsync

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestFilesystemOf(t *testing.T) {
	for _, tc := range []struct {
		magic  uint32
		name   string
		memory bool
		note   string
	}{
		{0xEF53, "ext2/3/4", false, ""},
		{0x58465342, "xfs", false, ""},
		{0x9123683E, "btrfs", false, ""},
		{0x01021994, "tmpfs", true, "tmpfs keeps files in memory"},
		{0x858458F6, "ramfs", true, "ramfs keeps files in memory"},
		{0x794C7630, "overlay", false, "upper layer"},
		{0x12345678, "unknown (0x12345678)", false, "0x12345678 is not one fleet-role knows"},
	} {
		fs := FilesystemOf(tc.magic)
		if fs.Name != tc.name || fs.Memory != tc.memory {
			t.Errorf("FilesystemOf(0x%x) = %q memory=%v, want %q memory=%v", tc.magic, fs.Name, fs.Memory, tc.name, tc.memory)
		}
		if tc.note == "" && fs.Note != "" || !strings.Contains(fs.Note, tc.note) {
			t.Errorf("FilesystemOf(0x%x) note %q, want one containing %q", tc.magic, fs.Note, tc.note)
		}
	}
}

func TestSummarize(t *testing.T) {
	if _, ok := Summarize(nil); ok {
		t.Error("Summarize(nil) ok, want not ok")
	}
	ms := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = float64(i+1) / 1000
		}
		rand.Shuffle(len(v), func(i, j int) { v[i], v[j] = v[j], v[i] })
		return v
	}
	for _, tc := range []struct {
		n             int
		p50, p99, max float64
	}{
		{1, 0.001, 0.001, 0.001},
		// With 100 values the p99 is the 99th: one outlier is forgiven.
		// One value fewer and it is the maximum; one more and the rank
		// ceil(0.99*101) = 100 is still one below the top.
		{99, 0.050, 0.099, 0.099},
		{100, 0.050, 0.099, 0.100},
		{101, 0.051, 0.100, 0.101},
	} {
		v := ms(tc.n)
		l, ok := Summarize(v)
		if !ok || l.P50 != tc.p50 || l.P99 != tc.p99 || l.Max != tc.max {
			t.Errorf("Summarize(1..%d ms) = %+v, %v; want p50 %g p99 %g max %g", tc.n, l, ok, tc.p50, tc.p99, tc.max)
		}
	}
}

// diskDir is a fresh directory on this machine's disk: under DefaultDir,
// which the test requires to be on one, so that no reading here is of memory.
func diskDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp(DefaultDir, "fleet-role-fsync-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if fs, err := FilesystemAt(dir); err != nil || fs.Memory {
		t.Fatalf("%s is on %s (%v), not a disk: these tests need %s on a disk", dir, fs.Name, err, DefaultDir)
	}
	return dir
}

func assertEmpty(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("%s still holds %v, want nothing left behind", dir, names)
	}
}

func TestMeasureSizes(t *testing.T) {
	dir := diskDir(t)
	const b = 4096
	for _, tc := range []struct {
		size   int64
		block  int
		writes int
	}{
		// One block just fits; one byte less holds none; one more is still
		// one whole block, as fio writes only whole blocks.
		{b, b, 1},
		{b - 1, b, -1},
		{b + 1, b, 1},
		{2 * b, b, 2},
		{-1, b, -1},
		{b, -1, -1},
	} {
		r, err := Measure(context.Background(), Options{Dir: dir, SizeBytes: tc.size, BlockBytes: tc.block})
		if tc.writes < 0 {
			if !errors.Is(err, ErrBadSize) {
				t.Errorf("size %d block %d: err %v, want ErrBadSize", tc.size, tc.block, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("size %d block %d: %v", tc.size, tc.block, err)
		}
		if r.Writes != tc.writes || r.BlockBytes != tc.block || r.SizeBytes != tc.size {
			t.Errorf("size %d block %d: %+v, want %d writes", tc.size, tc.block, r, tc.writes)
		}
		if !(r.P50Seconds > 0 && r.P50Seconds <= r.P99Seconds && r.P99Seconds <= r.MaxSeconds && r.MaxSeconds <= r.ElapsedSeconds) {
			t.Errorf("size %d block %d: want 0 < p50 <= p99 <= max <= elapsed: %+v", tc.size, tc.block, r)
		}
		if !r.MeasuredDisk || r.Note != "" || r.Dir != dir {
			t.Errorf("reading on disk: %+v, want measured_disk, no note, dir %s", r, dir)
		}
	}
	assertEmpty(t, dir)
}

// A reading stopped before it has made MinWrites writes, too few for a p99
// of their own, fails, naming how far it got; one stopped at or after
// MinWrites is the reading of the writes it made, cut. Either way its file
// is gone.
func TestMeasureStoppedMidRun(t *testing.T) {
	if MinWrites != 100 {
		t.Fatalf("MinWrites = %d, want 100: the fewest values whose p99 is not their maximum", MinWrites)
	}
	for _, at := range []int{MinWrites - 1, MinWrites, MinWrites + 1} {
		t.Run(fmt.Sprintf("after %d writes", at), func(t *testing.T) {
			dir := diskDir(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var during int
			opts := Options{Dir: dir, afterWrite: func(n int) {
				if n == at {
					entries, _ := os.ReadDir(dir)
					during = len(entries)
					cancel()
				}
			}}
			r, err := Measure(ctx, opts)
			switch {
			case at < MinWrites:
				if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), fmt.Sprintf("after %d of", at)) {
					t.Errorf("err %v, want context.Canceled after %d writes", err, at)
				}
			case err != nil:
				t.Errorf("stopped after %d writes, at least MinWrites: %v, want the cut reading", at, err)
			default:
				want := fmt.Sprintf("stopped after %d of %d writes: %v", at, opts.withDefaultsMust(t).Writes(), context.Canceled)
				if r.Writes != at || r.Cut != want || r.P99Seconds <= 0 || r.MaxSeconds < r.P99Seconds {
					t.Errorf("cut reading %+v: want %d writes, cut %q and its p99", r, at, want)
				}
			}
			if during != 1 {
				t.Errorf("%d files in %s mid-run, want the one being written", during, dir)
			}
			assertEmpty(t, dir)
		})
	}
}

func (o Options) withDefaultsMust(t *testing.T) Options {
	t.Helper()
	o, err := o.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestMeasureDeadlineAlreadyPassed(t *testing.T) {
	dir := diskDir(t)
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	if _, err := Measure(ctx, Options{Dir: dir}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err %v, want DeadlineExceeded", err)
	}
	assertEmpty(t, dir)
}

func TestMeasureMissingDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "absent")
	_, err := Measure(context.Background(), Options{Dir: dir})
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), dir) {
		t.Errorf("err %v, want not-exist naming %s", err, dir)
	}
}

// writeFile makes dir/name with a few bytes.
func writeFile(t *testing.T, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func exists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Lstat(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// A file left by a killed reading is removed; everything else in the
// directory is left as it was: other names, a directory, a link and a FIFO
// named like a reading's file, and the target of that link.
func TestRemoveStaleOnlyItsOwnFiles(t *testing.T) {
	dir := diskDir(t)
	outside := t.TempDir()
	stale := writeFile(t, dir, FilePrefix+"123456789")
	stale2 := writeFile(t, dir, FilePrefix+"0")
	var keep []string
	for _, name := range []string{
		FilePrefix,               // no digits
		FilePrefix + "12a",       // not only digits
		FilePrefix + "12.tmp",    // a suffix
		FilePrefix[1:] + "123",   // without the leading dot
		"x" + FilePrefix + "123", // a prefix before it
		"etcd-member.wal",
	} {
		keep = append(keep, writeFile(t, dir, name))
	}
	sub := filepath.Join(dir, FilePrefix+"77")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	inSub := writeFile(t, sub, FilePrefix+"78")
	target := writeFile(t, outside, "precious")
	link := filepath.Join(dir, FilePrefix+"88")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, FilePrefix+"99")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	keep = append(keep, sub, inSub, target, link, fifo)

	removed, err := RemoveStale(dir)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	if want := []string{stale2, stale}; !slices.Equal(removed, want) {
		t.Errorf("removed %v, want %v", removed, want)
	}
	for _, p := range []string{stale, stale2} {
		if exists(t, p) {
			t.Errorf("%s is still there", p)
		}
	}
	for _, p := range keep {
		if !exists(t, p) {
			t.Errorf("%s was removed; it is not a reading's file", p)
		}
	}
	if removed, err := RemoveStale(dir); err != nil || len(removed) != 0 {
		t.Errorf("second pass removed %v, %v; want nothing", removed, err)
	}
}

// A reading's file in use (locked by the reading that writes it) is left
// alone: RemoveStale run while a reading is in flight leaves it to finish.
func TestRemoveStaleLeavesAReadingInFlight(t *testing.T) {
	dir := diskDir(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const at = 50
	var removed []string
	var removeErr error
	var during int
	opts := Options{Dir: dir, SizeBytes: 2 * at * DefaultBlockBytes, afterWrite: func(n int) {
		if n == at {
			removed, removeErr = RemoveStale(dir)
			entries, _ := os.ReadDir(dir)
			during = len(entries)
		}
	}}
	if _, err := Measure(ctx, opts); err != nil {
		t.Fatalf("the reading failed after RemoveStale ran beside it: %v", err)
	}
	if removeErr != nil || len(removed) != 0 || during != 1 {
		t.Errorf("RemoveStale mid-reading removed %v (%v); %d files left, want the reading's own", removed, removeErr, during)
	}
	assertEmpty(t, dir)
}

func TestRemoveStaleMissingDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "absent")
	if _, err := RemoveStale(dir); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), dir) {
		t.Errorf("err %v, want not-exist naming %s", err, dir)
	}
}

// The reading's file carries the prefix RemoveStale recognises.
func TestMeasureFileNameIsRecognised(t *testing.T) {
	dir := diskDir(t)
	var names []string
	opts := Options{Dir: dir, SizeBytes: 4 * DefaultBlockBytes, afterWrite: func(n int) {
		if n == 1 {
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				names = append(names, e.Name())
			}
		}
	}}
	if _, err := Measure(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if len(names) != 1 || !isReadingFile(names[0]) {
		t.Errorf("files during the reading %v, want one named %s and digits", names, FilePrefix)
	}
}
