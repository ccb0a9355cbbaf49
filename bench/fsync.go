package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/fleet-role/fleet-role/internal/fsync"
)

// FsyncPair is one native reading and one fio run, back to back, in the
// same directory.
type FsyncPair struct {
	NativeP99, FioP99   float64 // seconds
	NativeWall, FioWall time.Duration
	Writes, FioWrites   int
}

// FsyncVsFio takes one paired run in dir: the native reading, then the
// recipe etcd's documentation gives (docs/facts.md), fio --rw=write
// --ioengine=sync --fdatasync=1 --size=22m --bs=2300. Which goes first
// alternates with odd, so that neither always runs on a disk the other has
// just warmed.
func FsyncVsFio(ctx context.Context, fio, dir string, odd bool) (FsyncPair, error) {
	var p FsyncPair
	native := func() error {
		t0 := time.Now()
		r, err := fsync.Measure(ctx, fsync.Options{Dir: dir})
		if err != nil {
			return err
		}
		if !r.MeasuredDisk {
			return fmt.Errorf("%s is on %s: fdatasync measures no disk there", dir, r.Filesystem)
		}
		p.NativeWall, p.NativeP99, p.Writes = time.Since(t0), r.P99Seconds, r.Writes
		return nil
	}
	viaFio := func() error {
		t0 := time.Now()
		fr, err := fsync.RunFio(ctx, fio, dir)
		p99, n := fr.P99Seconds, fr.Syncs
		p.FioWall, p.FioP99, p.FioWrites = time.Since(t0), p99, n
		return err
	}
	steps := []func() error{native, viaFio}
	if odd {
		steps[0], steps[1] = steps[1], steps[0]
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return p, err
		}
	}
	if p.Writes != p.FioWrites {
		return p, fmt.Errorf("fio timed %d fdatasyncs, the native reading %d: they did not write the same", p.FioWrites, p.Writes)
	}
	return p, nil
}
