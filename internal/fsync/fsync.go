// Package fsync takes the disk reading etcd's documentation points to (FACTS.md:
// fio --rw=write --ioengine=sync --fdatasync=1 --size=22m --bs=2300), done
// natively: lay a file out, write it sequentially in 2300-byte blocks with an
// fdatasync after each, and report the fdatasync latencies' p50, p99 and
// maximum. 2300 bytes is about the size of one etcd WAL entry, and etcd
// fdatasyncs its WAL after each, so the p99 is held to etcd's WAL fsync limit.
//
// The reading names the filesystem it was taken on: on tmpfs and other memory
// filesystems fdatasync does nothing, and the reading says it measured no disk.
// The file is removed afterwards, also when the context is cancelled.
package fsync

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fleet-role/fleet-role/internal/quantile"
)

// The recipe in FACTS.md: --size=22m --bs=2300.
const (
	DefaultSizeBytes  int64 = 22 << 20
	DefaultBlockBytes       = 2300
)

// DefaultDir is where a reading is taken when no directory is given. The FHS
// keeps /var/tmp across reboots, so it is on a disk where /tmp is often tmpfs.
const DefaultDir = "/var/tmp"

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
}

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
	l.P99, _ = quantile.High(latencies, 0.99)
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
// ctx is done, and removes its file whatever happens.
func Measure(ctx context.Context, opts Options) (_ Reading, err error) {
	opts, err = opts.withDefaults()
	if err != nil {
		return Reading{}, err
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return Reading{}, fmt.Errorf("fsync reading: %w", err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return Reading{}, fmt.Errorf("statfs %s: %w", dir, err)
	}
	// The magic numbers are 32-bit; Statfs_t.Type is wider or signed on
	// some architectures.
	fs := FilesystemOf(uint32(st.Type))

	start := time.Now()
	f, err := os.CreateTemp(dir, ".fleet-role-fsync-*")
	if err != nil {
		return Reading{}, fmt.Errorf("create file in %s: %w", dir, err)
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
			return Reading{}, fmt.Errorf("fsync reading in %s stopped after %d of %d writes: %w", dir, i, n, err)
		}
		if _, err := f.Write(block); err != nil {
			return Reading{}, fmt.Errorf("write %s: %w", f.Name(), err)
		}
		t0 := time.Now()
		if err := unix.Fdatasync(fd); err != nil {
			return Reading{}, fmt.Errorf("fdatasync %s: %w", f.Name(), err)
		}
		latencies = append(latencies, time.Since(t0).Seconds())
		if opts.afterWrite != nil {
			opts.afterWrite(i + 1)
		}
	}
	elapsed := time.Since(start)

	l, _ := Summarize(latencies)
	return Reading{
		Dir:            dir,
		Filesystem:     fs.Name,
		MeasuredDisk:   !fs.Memory,
		Note:           fs.Note,
		Writes:         n,
		BlockBytes:     opts.BlockBytes,
		SizeBytes:      opts.SizeBytes,
		P50Seconds:     l.P50,
		P99Seconds:     l.P99,
		MaxSeconds:     l.Max,
		ElapsedSeconds: elapsed.Seconds(),
	}, nil
}
