// Package fsync takes the disk reading etcd's documentation points to (docs/facts.md:
// fio --rw=write --ioengine=sync --fdatasync=1 --size=22m --bs=2300), done
// natively: lay a file out, write it sequentially in 2300-byte blocks with an
// fdatasync after each, and report the fdatasync latencies' p50, p99 and
// maximum. 2300 bytes is about the size of one etcd WAL entry, and etcd
// fdatasyncs its WAL after each, so the p99 is held to etcd's WAL fsync limit.
//
// The reading names the filesystem it was taken on: on tmpfs and other memory
// filesystems fdatasync does nothing, and the reading says it measured no disk.
// The file is removed afterwards, also when the context is cancelled. A file
// left by a process killed mid-reading is named FilePrefix followed by digits
// and holds no lock; RemoveStale removes such files and nothing else.
package fsync

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fleet-role/fleet-role/internal/quantile"
)

// The recipe in docs/facts.md: --size=22m --bs=2300.
const (
	DefaultSizeBytes  int64 = 22 << 20
	DefaultBlockBytes       = 2300
)

// DefaultDir is where a reading is taken when no directory is given. The FHS
// keeps /var/tmp across reboots, so it is on a disk where /tmp is often tmpfs.
const DefaultDir = "/var/tmp"

// FilePrefix starts the name of every file a reading writes; os.CreateTemp
// puts decimal digits after it. RemoveStale recognises a reading's file by
// that pattern alone, so the directory may hold anything else.
const FilePrefix = ".fleet-role-fsync-"

// maxCreateAttempts bounds the retries when RemoveStale unlinks a reading's
// new file between its creation and its lock: each retry needs another
// RemoveStale at that very moment, so two never happen in practice.
const maxCreateAttempts = 3

// ErrBadSize marks a size or block size that gives no whole block to write.
var ErrBadSize = errors.New("size must hold at least one block, and both must be positive")

// Options says where and how much to write. Zero sizes take the defaults.
type Options struct {
	// Dir is the directory the temporary file is made in. "" means DefaultDir.
	Dir string
	// SizeBytes is the size of the file; SizeBytes/BlockBytes whole blocks are
	// written, as fio does.
	SizeBytes int64
	// BlockBytes is the size of each write.
	BlockBytes int

	// afterWrite, when set, is called after the nth write's fdatasync.
	// Tests cancel mid-run through it.
	afterWrite func(n int)
}

// Reading is one fdatasync reading.
type Reading struct {
	Dir        string `json:"dir"`
	Filesystem string `json:"filesystem"`
	// MeasuredDisk is false on a memory filesystem: the latencies are then
	// of no disk at all.
	MeasuredDisk   bool    `json:"measured_disk"`
	Note           string  `json:"note,omitempty"`
	Writes         int     `json:"writes"`
	BlockBytes     int     `json:"block_bytes"`
	SizeBytes      int64   `json:"size_bytes"`
	P50Seconds     float64 `json:"p50_seconds"`
	P99Seconds     float64 `json:"p99_seconds"`
	MaxSeconds     float64 `json:"max_seconds"`
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	// Cut says why a reading ended before its last write (its bound ran
	// out); the figures are then those of the Writes it made.
	Cut string `json:"cut,omitempty"`
}

// tailPercentile is the percentile etcd's disk check judges fdatasync at.
const tailPercentile = 0.99

// MinWrites is the fewest writes a reading cut short must have made to be
// judged: the fewest whose p99 is a value of its own rather than the
// maximum (the tail rule, docs/limits.md).
var MinWrites = quantile.MinCount(tailPercentile)

// Latencies is the summary of a run's fdatasync latencies, in seconds.
type Latencies struct {
	P50, P99, Max float64
}

// Summarize gives the nearest-rank p50 and p99 (the rule every fleet-role
// limit is judged by) and the maximum of latencies. ok is false when there
// are none.
func Summarize(latencies []float64) (l Latencies, ok bool) {
	if l.P50, ok = quantile.High(latencies, 0.50); !ok {
		return Latencies{}, false
	}
	l.P99, _ = quantile.High(latencies, tailPercentile)
	l.Max, _ = quantile.High(latencies, 1)
	return l, true
}

// Writes is the number of whole blocks a run writes.
func (o Options) Writes() int {
	return int(o.SizeBytes / int64(o.BlockBytes))
}

func (o Options) withDefaults() (Options, error) {
	if o.Dir == "" {
		o.Dir = DefaultDir
	}
	if o.SizeBytes == 0 {
		o.SizeBytes = DefaultSizeBytes
	}
	if o.BlockBytes == 0 {
		o.BlockBytes = DefaultBlockBytes
	}
	if o.SizeBytes < 0 || o.BlockBytes < 0 || o.SizeBytes < int64(o.BlockBytes) {
		return o, fmt.Errorf("size %d bytes, block %d bytes: %w", o.SizeBytes, o.BlockBytes, ErrBadSize)
	}
	return o, nil
}

// Measure takes one reading in opts.Dir. It stops at the first write after
// ctx is done, and removes its file whatever happens. A reading stopped
// after at least MinWrites writes is returned as it stands, with Cut saying
// so: a disk too slow to finish the recipe within the caller's bound is
// exactly the disk the reading is for (at 7 s a sync, as SD cards have
// shown, 10,029 writes take almost 20 hours), and the writes it made are
// its tail. Fewer writes than that are an error.
func Measure(ctx context.Context, opts Options) (_ Reading, err error) {
	opts, err = opts.withDefaults()
	if err != nil {
		return Reading{}, err
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return Reading{}, fmt.Errorf("fsync reading: %w", err)
	}
	fs, err := FilesystemAt(dir)
	if err != nil {
		return Reading{}, err
	}

	start := wall.Now()
	f, err := createLocked(dir)
	if err != nil {
		return Reading{}, err
	}
	defer func() {
		cerr := f.Close()
		if rerr := os.Remove(f.Name()); rerr != nil {
			err = errors.Join(err, fmt.Errorf("remove %s: %w", f.Name(), rerr))
		} else if cerr != nil && err == nil {
			err = fmt.Errorf("close %s: %w", f.Name(), cerr)
		}
	}()
	fd := int(f.Fd())

	// fio lays the file out before writing (fallocate, native mode), so the
	// writes fill allocated extents; doing the same keeps the two readings
	// comparable. A filesystem without fallocate is written as it comes, as
	// fio then does too.
	if err := unix.Fallocate(fd, 0, 0, opts.SizeBytes); err != nil && !errors.Is(err, unix.EOPNOTSUPP) {
		return Reading{}, fmt.Errorf("fallocate %s: %w", f.Name(), err)
	}
	// fio hints a sequential job so; a failure changes nothing measured.
	_ = unix.Fadvise(fd, 0, opts.SizeBytes, unix.FADV_SEQUENTIAL)

	// Random bytes, so that a compressing or deduplicating filesystem
	// (btrfs, zfs) writes every block as it would a WAL entry.
	block := make([]byte, opts.BlockBytes)
	for i := range block {
		block[i] = byte(rand.Uint32())
	}

	n := opts.Writes()
	latencies := make([]float64, 0, n)
	for i := range n {
		if err := ctx.Err(); err != nil {
			if i >= MinWrites {
				r := summary(dir, fs, opts, latencies, wall.Since(start))
				r.Cut = fmt.Sprintf("stopped after %d of %d writes: %v", i, n, err)
				return r, nil
			}
			return Reading{}, fmt.Errorf("fsync reading in %s stopped after %d of %d writes (%d needed for a p99): %w", dir, i, n, MinWrites, err)
		}
		if _, err := f.Write(block); err != nil {
			return Reading{}, fmt.Errorf("write %s: %w", f.Name(), err)
		}
		t0 := wall.Now()
		if err := unix.Fdatasync(fd); err != nil {
			return Reading{}, fmt.Errorf("fdatasync %s: %w", f.Name(), err)
		}
		latencies = append(latencies, wall.Since(t0).Seconds())
		if opts.afterWrite != nil {
			opts.afterWrite(i + 1)
		}
	}
	return summary(dir, fs, opts, latencies, wall.Since(start)), nil
}

// summary is the reading of the writes made.
func summary(dir string, fs Filesystem, opts Options, latencies []float64, elapsed time.Duration) Reading {
	l, _ := Summarize(latencies)
	return Reading{
		Dir:            dir,
		Filesystem:     fs.Name,
		MeasuredDisk:   !fs.Memory,
		Note:           fs.Note,
		Writes:         len(latencies),
		BlockBytes:     opts.BlockBytes,
		SizeBytes:      opts.SizeBytes,
		P50Seconds:     l.P50,
		P99Seconds:     l.P99,
		MaxSeconds:     l.Max,
		ElapsedSeconds: elapsed.Seconds(),
	}
}

// createLocked makes the reading's file and holds an exclusive flock on it
// for as long as it is open, which tells RemoveStale it is in use: the kernel
// drops the lock when the process dies, so a killed reading's file is free to
// remove and a running one's never is. RemoveStale may take the lock and
// unlink the file in the instant between its creation and the lock; the file
// is then made again.
func createLocked(dir string) (*os.File, error) {
	for attempt := 1; ; attempt++ {
		f, err := os.CreateTemp(dir, FilePrefix+"*")
		if err != nil {
			return nil, fmt.Errorf("create file in %s: %w", dir, err)
		}
		fd := int(f.Fd())
		if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
			// A filesystem without locks: RemoveStale cannot lock the file
			// either, and so leaves it alone.
			return f, nil
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			f.Close()
			os.Remove(f.Name())
			return nil, fmt.Errorf("stat %s: %w", f.Name(), err)
		}
		if st.Nlink > 0 {
			return f, nil
		}
		f.Close() // RemoveStale took it before the lock
		if attempt == maxCreateAttempts {
			return nil, fmt.Errorf("create file in %s: removed by another process before it was locked, %d times", dir, attempt)
		}
	}
}

// isReadingFile says whether name is one a reading writes: FilePrefix and
// then decimal digits only.
func isReadingFile(name string) bool {
	rest, ok := strings.CutPrefix(name, FilePrefix)
	if !ok || rest == "" {
		return false
	}
	for _, c := range rest {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// RemoveStale removes from dir, not below it, the files a reading leaves
// when its process is killed before it can remove them (22 MiB each, beside
// etcd's data): regular files named FilePrefix and digits that no reading
// holds locked. Anything else, a file in use by a running reading (another
// probe's, or `fleet-role check fsync` run by hand) included, is left alone.
// It returns the paths removed; errors name the file and do not stop the rest.
func RemoveStale(dir string) (removed []string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("remove stale readings: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if !e.Type().IsRegular() || !isReadingFile(e.Name()) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		ok, err := removeIfUnlocked(path)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			removed = append(removed, path)
		}
	}
	if len(errs) > 0 {
		return removed, fmt.Errorf("remove stale readings in %s: %w", dir, errors.Join(errs...))
	}
	return removed, nil
}

// removeIfUnlocked unlinks path when it is a regular file and its lock can
// be taken, holding the lock while it does so that a reading creating the
// file sees it gone once it has the lock.
func removeIfUnlocked(path string) (bool, error) {
	// O_NOFOLLOW and O_NONBLOCK: a name swapped for a link or a FIFO since
	// the directory was read is neither followed nor waited on.
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil // its reading ended meanwhile
		}
		return false, fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, fmt.Errorf("stat %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return false, nil
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return false, nil // a reading is writing it
		}
		return false, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := unix.Unlink(path); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, fmt.Errorf("remove %s: %w", path, err)
	}
	return true, nil
}
