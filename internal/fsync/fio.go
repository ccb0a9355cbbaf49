package fsync

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// FioReading is what fio reports of the disk check etcd's documentation
// gives: its p99 fdatasync latency and how many fdatasyncs it timed.
type FioReading struct {
	P99Seconds float64
	Syncs      int
}

// fioJob names fio's job and so its file, which fio leaves behind.
const fioJob = "fleet-role-fio"

// RunFio runs etcd's recipe with the fio binary at path in dir:
// fio --rw=write --ioengine=sync --fdatasync=1 --size=22m --bs=2300, with
// JSON output, whose fdatasync percentiles are under jobs[0].sync.lat_ns
// (nanoseconds). It is the reference the native reading is held to.
func RunFio(ctx context.Context, fio, dir string) (FioReading, error) {
	wait, err := StartFio(ctx, fio, dir)
	if err != nil {
		return FioReading{}, err
	}
	return wait()
}

// StartFio starts RunFio's fio and returns what waits for it and reads its
// reading. For a caller that runs the recipe beside another reading of the
// same disk, started from the same goroutine one after the other (the
// comparison of the native reading with fio takes pairs side by side, each
// reader started from a thread it has raised).
func StartFio(ctx context.Context, fio, dir string) (wait func() (FioReading, error), err error) {
	cmd := fioCommand(ctx, fio, dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", cmd, err)
	}
	return func() (FioReading, error) {
		err := cmd.Wait()
		if ee, ok := err.(*exec.ExitError); ok {
			ee.Stderr = stderr.Bytes()
		}
		return fioResult(cmd, dir, stdout.Bytes(), err)
	}, nil
}

// fioCommand is RunFio's fio command, not started.
func fioCommand(ctx context.Context, fio, dir string) *exec.Cmd {
	return exec.CommandContext(ctx, fio, "--rw=write", "--ioengine=sync", "--fdatasync=1", "--directory="+dir,
		"--size=22m", "--bs=2300", "--name="+fioJob, "--output-format=json")
}

// fioResult removes the file fio left in dir and reads its output: what
// RunFio does once cmd has run, with the output and error it ran with.
func fioResult(cmd *exec.Cmd, dir string, out []byte, err error) (FioReading, error) {
	if rmErr := os.Remove(filepath.Join(dir, fioJob+".0.0")); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) && err == nil {
		err = rmErr
	}
	if err != nil {
		return FioReading{}, fmt.Errorf("%s: %w", cmd, err)
	}
	return ParseFio(out)
}

// ParseFio reads fio's JSON output of one job.
func ParseFio(out []byte) (FioReading, error) {
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
	if err := json.Unmarshal(out, &doc); err != nil {
		return FioReading{}, fmt.Errorf("parse fio output: %w: %.200s", err, out)
	}
	if len(doc.Jobs) != 1 {
		return FioReading{}, fmt.Errorf("fio reported %d jobs, want 1", len(doc.Jobs))
	}
	lat := doc.Jobs[0].Sync.LatNs
	ns, ok := lat.Percentile["99.000000"]
	if !ok {
		return FioReading{}, fmt.Errorf("fio output has no sync p99: %v", lat.Percentile)
	}
	return FioReading{P99Seconds: ns / 1e9, Syncs: lat.N}, nil
}
