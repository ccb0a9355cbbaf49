package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
// recipe etcd's documentation gives (FACTS.md), fio --rw=write
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
		p99, n, err := runFio(ctx, fio, dir)
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

// runFio returns fio's p99 fdatasync latency (seconds) and how many it timed.
// The wall time includes fio laying its file out, as the native reading's
// includes its fallocate.
func runFio(ctx context.Context, fio, dir string) (float64, int, error) {
	cmd := exec.CommandContext(ctx, fio, "--rw=write", "--ioengine=sync", "--fdatasync=1", "--directory="+dir,
		"--size=22m", "--bs=2300", "--name=fleet-role-bench", "--output-format=json")
	out, err := cmd.Output()
	// fio leaves its file behind.
	defer os.Remove(filepath.Join(dir, "fleet-role-bench.0.0"))
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", cmd, err)
	}
	// fio prints notes before the JSON document on some set-ups.
	if i := bytes.IndexByte(out, '{'); i > 0 {
		out = out[i:]
	}
	var doc struct {
		Jobs []struct {
			Sync struct {
				LatNs struct {
					N          int                `json:"N"`
					Percentile map[string]float64 `json:"percentile"`
				} `json:"lat_ns"`
			} `json:"sync"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(out, &doc); err != nil || len(doc.Jobs) != 1 {
		return 0, 0, fmt.Errorf("fio output (%v): %.200s", err, out)
	}
	lat := doc.Jobs[0].Sync.LatNs
	ns, ok := lat.Percentile["99.000000"]
	if !ok {
		return 0, 0, fmt.Errorf("fio output has no sync p99: %v", lat.Percentile)
	}
	return ns / 1e9, lat.N, nil
}
