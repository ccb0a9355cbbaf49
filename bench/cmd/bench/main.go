// Command bench measures fleet-role on this machine against the real
// components and prints one table; bench/run.sh runs it. With -write it
// also replaces the figures section of docs/performance.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fleet-role/fleet-role/bench"
	"github.com/fleet-role/fleet-role/lab/fleets/demo"
	"github.com/fleet-role/fleet-role/lab/kit/toolcache"
)

type options struct {
	rounds, probeSamples, shellSamples int
	rssSamples, controllerLoops        int
	fsyncRuns                          int
	fsyncDir                           string
	decideCount                        int
	detectionRuns, cleanWindows        int
	cleanStallPeriods                  int
	cleanMembersOnly                   bool
	write                              string
	onlyClean                          bool
	walHosts                           string
	walPeriods                         int
	walAgainst                         string
	onlyWAL                            bool
	onlyController                     bool
	onlyDecide                         bool
	controllerBinaries                 string
	controllerEnv                      string
	onlyMemory                         bool
	binary                             string
	log                                string
}

func main() {
	var o options
	flag.IntVar(&o.rounds, "rounds", 5, "paired rounds of probe samples and shell-route samples")
	flag.IntVar(&o.probeSamples, "probe-samples", 200, "probe samples per round")
	flag.IntVar(&o.shellSamples, "shell-samples", 10, "shell-route samples per round")
	flag.IntVar(&o.rssSamples, "rss-samples", 1000, "samples the fleet-role probe process takes before its memory is read")
	flag.IntVar(&o.controllerLoops, "controller-loops", 100, "decisions the fleet-role controller process takes, over the records of a large fleet, before its memory is read")
	flag.IntVar(&o.fsyncRuns, "fsync-runs", 5, "paired runs of the fsync reading and fio")
	flag.StringVar(&o.fsyncDir, "fsync-dir", "/var/tmp", "directory on this machine's disk for the fsync comparison")
	flag.IntVar(&o.decideCount, "decide-count", 5, "runs of BenchmarkDecide (go test -count)")
	flag.IntVar(&o.detectionRuns, "detection-runs", 3, "demo runs with the slow fault (0: skip)")
	flag.IntVar(&o.cleanWindows, "clean-windows", 0, "windows of the clean run (0: skip; the long part, 50 s a window)")
	// Three periods: the stall of issue 12, long enough that every host
	// catches it f+1 = 2 times at the demo's window 50 and p98 (f = 1) and
	// more (docs/limits.md, "No flapping").
	flag.IntVar(&o.cleanStallPeriods, "clean-stall-periods", 3, "periods the clean run stops every etcd member and probe for, once a window (0: no stall)")
	flag.BoolVar(&o.cleanMembersOnly, "clean-stall-members-only", false, "stall the etcd members alone, the probes sampling on (the harsher case for the decision core)")
	flag.BoolVar(&o.onlyClean, "only-clean", false, "run the clean run alone (with -clean-windows), to repeat it")
	flag.StringVar(&o.walHosts, "wal-hosts", "10,50", "recording hosts of the etcd WAL measurement, fewer then more (empty: skip)")
	flag.IntVar(&o.walPeriods, "wal-periods", 30, "periods (of 1 s) the WAL measurement counts, once every window is full")
	flag.BoolVar(&o.onlyWAL, "only-wal", false, "run the etcd WAL measurement alone")
	flag.StringVar(&o.walAgainst, "wal-against", "", "also measure the etcd WAL bytes per sample of the build of this git revision (an earlier release, say v0.1.0 or HEAD~3), at the same hosts in the same fleet, and give the ratio")
	flag.StringVar(&o.controllerEnv, "controller-env", "", "with -only-controller: comma-separated NAME=VALUE settings added to the controller's environment (GOMEMLIMIT=48MiB, say)")
	flag.BoolVar(&o.onlyDecide, "only-decide", false, "run BenchmarkDecide alone (-decide-count times)")
	flag.BoolVar(&o.onlyController, "only-controller", false, "run the controller's resident memory alone, over the large fleet's records")
	flag.StringVar(&o.controllerBinaries, "controller-binaries", "", "with -only-controller: comma-separated fleet-role binaries to measure in turn (another build, for a before and after) besides the one built from the checkout")
	flag.BoolVar(&o.onlyMemory, "only-memory", false, "run the probe's and the controller's resident memory alone")
	flag.StringVar(&o.binary, "binary", "", "measure this fleet-role binary instead of building ./cmd/fleet-role as the image does (to set two builds side by side)")
	flag.StringVar(&o.write, "write", "", "replace the figures section of this file (docs/performance.md)")
	flag.StringVar(&o.log, "log", filepath.Join(os.TempDir(), "fleet-role-bench.log"), "progress and the demo's output")
	flag.Parse()
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	logf, err := os.Create(o.log)
	if err != nil {
		return err
	}
	defer logf.Close()
	progress := io.MultiWriter(os.Stderr, logf)
	step := func(format string, a ...any) {
		fmt.Fprintf(progress, "== %s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
	}
	tools, err := findTools()
	if err != nil {
		return err
	}
	fio, err := exec.LookPath("fio")
	if err != nil {
		return errors.New("fio is not installed: bench/run.sh installs it (hack/tools.sh fio)")
	}
	tmp, err := os.MkdirTemp("", "fleet-role-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	binary := o.binary
	if binary == "" {
		step("building fleet-role as the image does (Dockerfile)")
		if binary, err = buildImageBinary(ctx, root, tmp); err != nil {
			return err
		}
	}

	var rows []bench.Row
	var notes []string
	started := time.Now()
	if o.onlyClean {
		o.detectionRuns = 0
		rows, notes, err := detectionRows(ctx, tools.Etcd, o, logf, step)
		if err != nil {
			return err
		}
		fmt.Println(report(rows, notes, o, time.Since(started)))
		return nil
	}

	if o.onlyDecide {
		step("BenchmarkDecide x %d", o.decideCount)
		rows, err := decideRows(ctx, root, o.decideCount)
		if err != nil {
			return err
		}
		fmt.Println(report(rows, nil, o, time.Since(started)))
		return nil
	}

	if o.onlyWAL {
		rows, notes, err := walRows(ctx, root, tmp, binary, tools, o, step)
		if err != nil {
			return err
		}
		fmt.Println(report(rows, notes, o, time.Since(started)))
		return nil
	}

	step("starting %d etcd members, kube-apiserver, deploy/fleet-role.yaml and %d Nodes", bench.Voters, bench.Voters+bench.Standbys)
	env, err := bench.Start(ctx, root, filepath.Join(tmp, "env"), tools)
	if err != nil {
		return err
	}
	defer env.Stop()
	if o.onlyController {
		p, err := env.NewProber(ctx)
		if err != nil {
			return err
		}
		step("a full window of probe samples, the record the standbys' are copied from")
		_, err = bench.ProbeSamples(ctx, p, env.Settings.Window)
		p.Close()
		if err != nil {
			return err
		}
		rows, err := controllerRows(ctx, env, binary, o, step)
		if err != nil {
			return err
		}
		fmt.Println(report(rows, nil, o, time.Since(started)))
		return nil
	}
	if o.onlyMemory {
		rows, _, err := memoryRows(ctx, env, binary, o, step)
		if err != nil {
			return err
		}
		fmt.Println(report(rows, nil, o, time.Since(started)))
		return nil
	}
	r, n, err := sampleCosts(ctx, env, o, step)
	if err != nil {
		return err
	}
	rows, notes = append(rows, r...), append(notes, n...)

	r, liveBytes, err := memoryRows(ctx, env, binary, o, step)
	if err != nil {
		return err
	}
	rows = append(rows, r...)
	env.Stop()

	r, n, err = walRows(ctx, root, tmp, binary, tools, o, step)
	if err != nil {
		return err
	}
	rows, notes = append(rows, r...), append(notes, n...)

	r, err = fsyncRows(ctx, fio, o, step)
	if err != nil {
		return err
	}
	rows = append(rows, r...)

	step("BenchmarkDecide x %d", o.decideCount)
	r, err = decideRows(ctx, root, o.decideCount)
	if err != nil {
		return err
	}
	rows = append(rows, r...)

	step("entry footprint (internal/entry's worst-case windows)")
	fp, err := bench.EntryFootprint(ctx, root)
	if err != nil {
		return err
	}
	rows = append(rows, footprintRows(fp, liveBytes)...)

	r, n, err = detectionRows(ctx, tools.Etcd, o, logf, step)
	if err != nil {
		return err
	}
	rows, notes = append(rows, r...), append(notes, n...)

	section := report(rows, notes, o, time.Since(started))
	fmt.Println(section)
	if o.write != "" {
		if err := bench.WriteSection(o.write, section); err != nil {
			return err
		}
		step("wrote %s", o.write)
	}
	return nil
}

// buildAt builds ./cmd/fleet-role as of the git revision rev, from a
// worktree of root's repository under dir, as buildImageBinary builds.
func buildAt(ctx context.Context, root, dir, rev string) (string, error) {
	wt := filepath.Join(dir, "worktree-"+strings.NewReplacer("/", "-", "~", "-", "^", "-").Replace(rev))
	add := exec.CommandContext(ctx, "git", "worktree", "add", "--detach", wt, rev)
	add.Dir = root
	if out, err := add.CombinedOutput(); err != nil {
		return "", fmt.Errorf("-wal-against %s: git worktree add: %w\n%s", rev, err, out)
	}
	defer func() {
		rm := exec.Command("git", "worktree", "remove", "--force", wt)
		rm.Dir = root
		_ = rm.Run()
	}()
	out := filepath.Join(dir, "against")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	bin, err := buildImageBinaryFrom(ctx, wt, out)
	if err != nil {
		return "", fmt.Errorf("-wal-against %s: %w", rev, err)
	}
	return bin, nil
}

// buildImageBinary builds ./cmd/fleet-role into dir with the Dockerfile's
// flags (static, trimmed, stripped), so that the memory measured is the
// image's binary's: an unstripped build maps more of itself.
func buildImageBinary(ctx context.Context, root, dir string) (string, error) {
	return buildImageBinaryFrom(ctx, root, dir)
}

func buildImageBinaryFrom(ctx context.Context, root, dir string) (string, error) {
	binary := filepath.Join(dir, "fleet-role")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", binary, "./cmd/fleet-role")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return binary, nil
}

// memoryRows runs the probe and then the controller as their own processes
// and reads their resident memory; it also returns the bytes of the probe's
// live record.
func memoryRows(ctx context.Context, env *bench.Env, binary string, o options, step func(string, ...any)) ([]bench.Row, int, error) {
	step("fleet-role probe process: %d samples at %s", o.rssSamples, bench.ComponentPeriod)
	pc, err := env.RunProbe(ctx, binary, o.rssSamples)
	if err != nil {
		return nil, 0, err
	}
	liveBytes, err := env.EntryBytes(ctx, env.Node)
	if err != nil {
		return nil, 0, err
	}
	rows := []bench.Row{{Measure: "probe resident memory after " + fmt.Sprint(pc.Loops) + " samples (`fleet-role probe`, own process)",
		Figure: memFigure(pc.Memory),
		Goal:   "< 32 MiB", Met: bench.Verdict(pc.Memory.HWM < 32<<20)}}

	r, err := controllerRows(ctx, env, binary, o, step)
	if err != nil {
		return nil, 0, err
	}
	return append(rows, r...), liveBytes, nil
}

func sampleCosts(ctx context.Context, env *bench.Env, o options, step func(string, ...any)) ([]bench.Row, []string, error) {
	p, err := env.NewProber(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer p.Close()
	step("warm-up: %d probe samples (a full window) and 2 shell samples", env.Settings.Window)
	if _, err := bench.ProbeSamples(ctx, p, env.Settings.Window); err != nil {
		return nil, nil, err
	}
	if _, err := env.ShellSamples(ctx, 2); err != nil {
		return nil, nil, err
	}
	var cpu, wall, allocs, allocBytes, shellCPU, shellWall, cpuRatio, wallRatio []float64
	for round := range o.rounds {
		step("round %d of %d: %d probe samples, %d shell-route samples", round+1, o.rounds, o.probeSamples, o.shellSamples)
		var ours, shell bench.Cost
		var err error
		// Alternate which goes first, so that neither always runs on a
		// machine the other has just warmed or loaded.
		var probeErr error
		if round%2 == 0 {
			ours, probeErr = bench.ProbeSamples(ctx, p, o.probeSamples)
			shell, err = env.ShellSamples(ctx, o.shellSamples)
		} else {
			shell, err = env.ShellSamples(ctx, o.shellSamples)
			ours, probeErr = bench.ProbeSamples(ctx, p, o.probeSamples)
		}
		if err = errors.Join(probeErr, err); err != nil {
			return nil, nil, err
		}
		cpu, wall = append(cpu, ours.CPU.Seconds()), append(wall, ours.Wall.Seconds())
		allocs, allocBytes = append(allocs, ours.Allocs), append(allocBytes, ours.AllocBytes)
		shellCPU, shellWall = append(shellCPU, shell.CPU.Seconds()), append(shellWall, shell.Wall.Seconds())
		cpuRatio = append(cpuRatio, ours.CPU.Seconds()/shell.CPU.Seconds())
		wallRatio = append(wallRatio, ours.Wall.Seconds()/shell.Wall.Seconds())
	}
	if err := env.CheckProbeEntry(ctx, env.Settings.Window); err != nil {
		return nil, nil, err
	}
	shellBytes, err := env.EntryBytes(ctx, env.ShellRecord())
	if err != nil {
		return nil, nil, err
	}
	ratio := bench.Median(cpuRatio)
	rows := []bench.Row{
		{Measure: "probe sample: CPU (user+sys)", Figure: ms(bench.Median(cpu)), Goal: "", Met: ""},
		{Measure: "probe sample: wall", Figure: ms(bench.Median(wall))},
		{Measure: "probe sample: allocations", Figure: fmt.Sprintf("%.0f allocs, %.0f KiB", bench.Median(allocs), bench.Median(allocBytes)/1024)},
		{Measure: "shell route sample: CPU (children's user+sys)", Figure: ms(bench.Median(shellCPU))},
		{Measure: "shell route sample: wall", Figure: ms(bench.Median(shellWall))},
		{Measure: "CPU ratio probe / shell route (median of per-round ratios)", Figure: fmt.Sprintf("1/%.0f (%.4f; rounds %s)", 1/ratio, ratio, ratios(cpuRatio)),
			Goal: "< 1/50", Met: bench.Verdict(ratio < 1.0/50)},
		{Measure: "wall ratio probe / shell route", Figure: fmt.Sprintf("1/%.0f (%.4f)", 1/bench.Median(wallRatio), bench.Median(wallRatio))},
	}
	notes := []string{fmt.Sprintf("Samples: %d rounds of %d probe samples and %d shell-route samples, alternating which goes first; the probe's window full (%d samples, entry %d bytes) and the shell route's (%d bytes) too, so each sample writes a full window.",
		o.rounds, o.probeSamples, o.shellSamples, env.Settings.Window, mustBytes(env.EntryBytes(ctx, env.Node)), shellBytes)}
	return rows, notes, nil
}

// walRows measures the etcd WAL bytes per sample at each of -wal-hosts in
// a fleet of its own (the ten Nodes Start makes and the recording hosts), so
// that neither the filler hosts of the controller's run nor the probe
// measured alone weigh on it, and holds the fewest and the most hosts to
// the bounds.
func walRows(ctx context.Context, root, tmp, binary string, tools bench.Tools, o options, step func(string, ...any)) ([]bench.Row, []string, error) {
	if o.walHosts == "" {
		return nil, []string{"The etcd WAL measurement was not part of this run."}, nil
	}
	var counts []int
	for _, f := range strings.Split(o.walHosts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, nil, fmt.Errorf("-wal-hosts %q: %q is not a count of hosts", o.walHosts, f)
		}
		counts = append(counts, n)
	}
	if len(counts) < 2 || !slices.IsSorted(counts) {
		return nil, nil, fmt.Errorf("-wal-hosts %q: give at least two counts, fewest first", o.walHosts)
	}
	step("starting a fleet for the etcd WAL measurement")
	env, err := bench.Start(ctx, root, filepath.Join(tmp, "wal"), tools)
	if err != nil {
		return nil, nil, err
	}
	defer env.Stop()
	var rows []bench.Row
	var runs []bench.WALRun
	for _, hosts := range counts {
		step("etcd WAL: %d fleet-role probe processes at a %s period, %d periods once every window is full", hosts, bench.WALPeriod, o.walPeriods)
		r, err := env.WALPerSample(ctx, binary, hosts, o.walPeriods)
		if err != nil {
			return nil, nil, err
		}
		step("etcd WAL: %d hosts: %.0f bytes per sample (%d writes, %d other revisions) in %s", hosts, r.PerSample(), r.Writes, r.Other, r.Elapsed.Round(time.Second))
		runs = append(runs, r)
		rows = append(rows, bench.Row{
			Measure: fmt.Sprintf("etcd WAL bytes per sample, %d recording hosts (per-host records, `fleet-role probe` processes)", hosts),
			Figure: fmt.Sprintf("%.0f bytes (%d writes in %s; record %.0f bytes as stored, entry %.0f; %d windows and %d tails written, %.0f bytes each as stored)",
				r.PerSample(), r.Writes, r.Measured.Round(100*time.Millisecond), r.RecordBytes, r.EntryBytes, r.Windows, r.Tails, r.WrittenBytes),
			Goal: fmt.Sprintf("<= %d", bench.MaxWALPerSample), Met: bench.Verdict(r.PerSample() <= bench.MaxWALPerSample),
		})
	}
	if o.walAgainst != "" {
		step("etcd WAL: building %s to measure beside this build", o.walAgainst)
		against, err := buildAt(ctx, root, tmp, o.walAgainst)
		if err != nil {
			return nil, nil, err
		}
		for i, hosts := range counts {
			step("etcd WAL: %d probe processes of %s", hosts, o.walAgainst)
			r, err := env.WALPerSample(ctx, against, hosts, o.walPeriods)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", o.walAgainst, err)
			}
			ratio := r.PerSample() / runs[i].PerSample()
			rows = append(rows,
				bench.Row{Measure: fmt.Sprintf("etcd WAL bytes per sample, %d recording hosts, of %s", hosts, o.walAgainst),
					Figure: fmt.Sprintf("%.0f bytes (%d writes in %s)", r.PerSample(), r.Writes, r.Measured.Round(100*time.Millisecond))},
				bench.Row{Measure: fmt.Sprintf("etcd WAL bytes per sample, %d hosts, %s / this build", hosts, o.walAgainst),
					Figure: fmt.Sprintf("%.2f", ratio), Goal: ">= 3", Met: bench.Verdict(ratio >= 3)})
		}
	}
	small, large := runs[0], runs[len(runs)-1]
	growth, toRecord, _ := bench.WALVerdict(small, large)
	rows = append(rows,
		bench.Row{Measure: fmt.Sprintf("etcd WAL bytes per sample, %d / %d hosts", large.Hosts, small.Hosts),
			Figure: fmt.Sprintf("%.3f", growth), Goal: fmt.Sprintf("<= %.2f", bench.MaxWALGrowth), Met: bench.Verdict(growth <= bench.MaxWALGrowth)},
		bench.Row{Measure: fmt.Sprintf("etcd WAL bytes per sample / size of the object written, %d hosts", large.Hosts),
			Figure: fmt.Sprintf("%.3f (%.0f / %.0f bytes)", toRecord, large.PerSample(), large.WrittenBytes), Goal: fmt.Sprintf("<= %.0f", bench.MaxWALToRecord), Met: bench.Verdict(toRecord <= bench.MaxWALToRecord)})
	notes := []string{fmt.Sprintf("etcd WAL: each recording host a standby with an eligible Node, a token bound to a Pod on it and a record seeded with a full realistic window (window %d), so every window written is a full one; the controller's Lease saying it reads the tail layout; %s period; measured over %d periods once each probe had written twice; WAL bytes the mean of the three members' etcd_disk_wal_write_bytes_total; writes counted by revision from a watch of the records; the runs took %s.",
		env.Settings.Window, bench.WALPeriod, o.walPeriods, walElapsed(runs))}
	return rows, notes, nil
}

func walElapsed(runs []bench.WALRun) string {
	s := make([]string, len(runs))
	for i, r := range runs {
		s[i] = fmt.Sprintf("%s at %d hosts", r.Elapsed.Round(time.Second), r.Hosts)
	}
	return strings.Join(s, ", ")
}

func fsyncRows(ctx context.Context, fio string, o options, step func(string, ...any)) ([]bench.Row, error) {
	var p99Ratio, wallRatio, ours, theirs []float64
	for run := range o.fsyncRuns {
		step("fsync run %d of %d in %s: native reading and fio", run+1, o.fsyncRuns, o.fsyncDir)
		p, err := bench.FsyncVsFio(ctx, fio, o.fsyncDir, run%2 == 1)
		if err != nil {
			return nil, err
		}
		p99Ratio = append(p99Ratio, p.NativeP99/p.FioP99)
		wallRatio = append(wallRatio, p.NativeWall.Seconds()/p.FioWall.Seconds())
		ours, theirs = append(ours, p.NativeP99), append(theirs, p.FioP99)
	}
	pr, wr := bench.Median(p99Ratio), bench.Median(wallRatio)
	return []bench.Row{
		{Measure: fmt.Sprintf("fsync p99: native / fio, %s (%d paired runs)", o.fsyncDir, o.fsyncRuns),
			Figure: fmt.Sprintf("%.2f (native %s, fio %s; runs %s)", pr, ms(bench.Median(ours)), ms(bench.Median(theirs)), ratios(p99Ratio)),
			Goal:   "0.80 to 1.25", Met: bench.Verdict(pr >= 0.8 && pr <= 1.25)},
		{Measure: "fsync wall time: native / fio", Figure: fmt.Sprintf("%.2f (runs %s)", wr, ratios(wallRatio)),
			Goal: "<= 1", Met: bench.Verdict(wr <= 1)},
	}, nil
}

func decideRows(ctx context.Context, root string, count int) ([]bench.Row, error) {
	runs, err := bench.DecideBench(ctx, root, count)
	if err != nil {
		return nil, err
	}
	med := map[int]bench.DecideRun{}
	cpuRuns := map[int][]float64{}
	for _, hosts := range []int{5, 50, 500} {
		var ns, cpu, al, by, eb []float64
		for _, r := range runs {
			if r.Hosts == hosts {
				ns, cpu = append(ns, r.NsPerOp), append(cpu, r.CPUNsPerOp)
				al, by, eb = append(al, r.AllocsPerOp), append(by, r.BytesPerOp), append(eb, r.EntryBytes)
			}
		}
		if len(ns) == 0 {
			return nil, fmt.Errorf("BenchmarkDecide gave no run at %d hosts", hosts)
		}
		med[hosts] = bench.DecideRun{Hosts: hosts, NsPerOp: bench.Median(ns), CPUNsPerOp: bench.Median(cpu),
			AllocsPerOp: bench.Median(al), BytesPerOp: bench.Median(by), EntryBytes: bench.Median(eb)}
		for _, c := range cpu {
			cpuRuns[hosts] = append(cpuRuns[hosts], c/1e6)
		}
	}
	var rows []bench.Row
	for _, hosts := range []int{5, 50, 500} {
		r := med[hosts]
		row := bench.Row{Measure: fmt.Sprintf("one decision, %d hosts (5 voters, window 100): CPU (wall)", hosts),
			Figure: fmt.Sprintf("%s (%s), %.0f allocs, %.0f KiB allocated (entries %.0f KiB)", ms(r.CPUNsPerOp/1e9), ms(r.NsPerOp/1e9), r.AllocsPerOp, r.BytesPerOp/1024, r.EntryBytes/1024)}
		if hosts == 50 {
			// Judged on the CPU time: the decision's work, which on an idle
			// core is its wall time too; on a machine busy with other work
			// the wall time also counts the waits for a core.
			row.Figure += "; CPU runs " + ratios(cpuRuns[hosts]) + " ms"
			row.Goal, row.Met = "< 5 ms", bench.Verdict(r.CPUNsPerOp < 5e6)
		}
		rows = append(rows, row)
	}
	// Five voters throughout, so hosts x voters grows as hosts does.
	g1, g2 := med[50].CPUNsPerOp/med[5].CPUNsPerOp, med[500].CPUNsPerOp/med[50].CPUNsPerOp
	rows = append(rows, bench.Row{Measure: "decision growth (CPU time ratio; hosts x voters grows 10x each step)",
		Figure: fmt.Sprintf("5->50: %.1fx, 50->500: %.1fx; allocs %.1fx, %.1fx", g1, g2, med[50].AllocsPerOp/med[5].AllocsPerOp, med[500].AllocsPerOp/med[50].AllocsPerOp),
		Goal:   "<= 10x a step (linear)", Met: bench.Verdict(g1 <= 10 && g2 <= 10)})
	return rows, nil
}

func footprintRows(fp bench.Footprint, live int) []bench.Row {
	b := fp.Bytes
	largest, most := fp.Largest()
	return []bench.Row{
		{Measure: "full-window entry, worst values: standby / voter, 3 voters", Figure: fmt.Sprintf("%d / %d bytes", b["standby, 3 voters"], b["voter, 3 voters"])},
		{Measure: "full-window entry, worst values: standby / voter, 5 voters", Figure: fmt.Sprintf("%d / %d bytes", b["standby, 5 voters"], b["voter, 5 voters"])},
		{Measure: "full-window entry of the live voter (3 voters, idle etcd)", Figure: fmt.Sprintf("%d bytes", live)},
		// A record shrinks only past its cap: a real host's full window
		// must stay under it, so that no healthy host is reported full.
		{Measure: "largest full-window entry, worst values, against the record cap (window 100, max_servers 5)",
			Figure: fmt.Sprintf("%d of %d bytes (%s)", most, fp.Cap, largest), Goal: "under the cap", Met: bench.Verdict(most < fp.Cap)},
	}
}

func detectionRows(ctx context.Context, etcd string, o options, log io.Writer, step func(string, ...any)) ([]bench.Row, []string, error) {
	var rows []bench.Row
	var notes []string
	d := demo.Defaults()
	if o.detectionRuns > 0 {
		var periods []float64
		for run := range o.detectionRuns {
			step("demo run %d of %d: slow fault (%s each way)", run+1, o.detectionRuns, d.Delay)
			n, err := bench.Detection(ctx, log)
			if err != nil {
				return nil, nil, err
			}
			periods = append(periods, float64(n))
		}
		rows = append(rows, bench.Row{Measure: fmt.Sprintf("detection: periods from the slow fault to the swap named (demo, %s period, window %d)", d.Period, demo.Settings(d.Period).Window),
			Figure: fmt.Sprintf("%.0f (median of %d runs: %s)", bench.Median(periods), len(periods), ints(periods))})
	}
	if o.cleanWindows > 0 {
		step("clean run: %d windows with the demo's settings, a stall of %d periods in each", o.cleanWindows, o.cleanStallPeriods)
		c, err := bench.CleanRun(ctx, etcd, bench.CleanConfig{Windows: o.cleanWindows, StallPeriods: o.cleanStallPeriods, MembersOnly: o.cleanMembersOnly}, log)
		if err != nil {
			return nil, nil, err
		}
		rows = append(rows, cleanRows(c)...)
		if c.MemoryVerdictChanges != c.VerdictChanges {
			notes = append(notes, fmt.Sprintf("Clean run: the status memory's verdict_changes rose by %d, the bench counted %d.", c.MemoryVerdictChanges, c.VerdictChanges))
		}
		for _, ch := range c.Changes {
			notes = append(notes, "Clean run: "+ch)
		}
	} else {
		notes = append(notes, "The clean run was not part of this run (bench/run.sh -clean-windows 10 runs it).")
	}
	return rows, notes, nil
}

// cleanRows are the clean run's figures: swaps and flaps have goal 0.
func cleanRows(c bench.Clean) []bench.Row {
	what := fmt.Sprintf("clean run, %d windows (%d decisions)", c.Windows, c.Decisions)
	stalls := "no stall"
	if c.Stalls > 0 {
		whose := "whole-fleet"
		if c.MembersOnly {
			whose = "members-only"
		}
		what += fmt.Sprintf(", %d %s stalls of %d periods", c.Stalls, whose, c.StallPeriods)
		stalls = fmt.Sprintf("%d stalls of %s to %s", c.Stalls, c.ShortestStall.Round(time.Millisecond), c.LongestStall.Round(time.Millisecond))
	}
	return []bench.Row{
		{Measure: what + ": swaps published", Figure: fmt.Sprintf("%d (decisions publishing one: %d)", c.Swaps, c.SwapDecisions), Goal: "0", Met: bench.Verdict(c.Swaps == 0)},
		{Measure: "clean run: flaps (bench's count; status memory's)", Figure: fmt.Sprintf("%d; %d", c.Flaps, c.MemoryFlaps), Goal: "0", Met: bench.Verdict(c.Flaps == 0 && c.MemoryFlaps == 0)},
		{Measure: "clean run: decisions naming a voter to leave; longest run of named_decisions", Figure: fmt.Sprintf("%d; %d", c.NamedDecisions, c.LongestNamed)},
		{Measure: "clean run: verdict changes", Figure: fmt.Sprint(c.VerdictChanges)},
		{Measure: "clean run: stalls measured (the fleet stopped to its continuing)", Figure: stalls},
	}
}

func report(rows []bench.Row, notes []string, o options, took time.Duration) string {
	var b strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "Measured %s on %s (%d CPUs, %s, %s), in %s.\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), host, runtime.NumCPU(), runtime.GOOS+"/"+runtime.GOARCH, runtime.Version(), took.Round(time.Second))
	b.WriteString(bench.Table(rows))
	if len(notes) > 0 {
		b.WriteString("\n")
		for _, n := range notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	return b.String()
}

func findTools() (bench.Tools, error) {
	t := bench.Tools{Etcd: os.Getenv("FLEET_ROLE_ETCD"), KubeAPIServer: os.Getenv("FLEET_ROLE_KUBE_APISERVER")}
	if t.Etcd == "" {
		t.Etcd = toolcache.EtcdPath()
	}
	if t.KubeAPIServer == "" {
		t.KubeAPIServer = toolcache.KubeAPIServerPath()
	}
	for _, p := range []string{t.Etcd, t.KubeAPIServer} {
		if _, err := os.Stat(p); err != nil {
			return t, fmt.Errorf("%w: run bench/run.sh, which builds it with hack/tools.sh", err)
		}
	}
	var err error
	if t.Kubectl, err = exec.LookPath("kubectl"); err != nil {
		return t, errors.New("kubectl is not on PATH")
	}
	for _, tool := range []string{"jq", "curl", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			return t, fmt.Errorf("%s is not on PATH: bench/run.sh installs it", tool)
		}
	}
	return t, nil
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("run from inside the fleet-role repository (no go.mod above)")
		}
		dir = up
	}
}

func ms(sec float64) string {
	switch {
	case sec >= 1:
		return fmt.Sprintf("%.2f s", sec)
	case sec >= 1e-3:
		return fmt.Sprintf("%.2f ms", sec*1e3)
	default:
		return fmt.Sprintf("%.1f µs", sec*1e6)
	}
}

// controllerRows gives the fleet FillerHosts standbys with records and
// reads the resident memory of `fleet-role controller`, as its own process,
// after o.controllerLoops decisions over them: of binary, and then of each
// of o.controllerBinaries (-only-controller), beside it.
func controllerRows(ctx context.Context, env *bench.Env, binary string, o options, step func(string, ...any)) ([]bench.Row, error) {
	step("adding %d standbys with records", bench.FillerHosts)
	hosts, filled, err := env.FillRecords(ctx)
	if err != nil {
		return nil, err
	}
	binaries := []string{binary}
	if o.onlyController && o.controllerBinaries != "" {
		binaries = append(binaries, strings.Split(o.controllerBinaries, ",")...)
	}
	var rows []bench.Row
	for i, b := range binaries {
		step("fleet-role controller (%s) for %d decisions", b, o.controllerLoops)
		var extra []string
		if o.onlyController && o.controllerEnv != "" {
			extra = strings.Split(o.controllerEnv, ",")
		}
		cc, err := env.RunController(ctx, b, o.controllerLoops, extra...)
		if err != nil {
			return nil, err
		}
		what := "`fleet-role controller`"
		if i > 0 {
			what = "`" + b + " controller`"
		}
		if len(extra) > 0 {
			what += " with " + strings.Join(extra, " ")
		}
		// The largest fleet BenchmarkDecide measures, with a record each:
		// records have no shared limit, so the fleet's size is what sizes
		// the controller (docs/performance.md).
		rows = append(rows, bench.Row{Measure: fmt.Sprintf("controller resident memory after %d decisions over %d records (%d bytes of entries; %s, own process)", cc.Loops, hosts, filled, what),
			Figure: memFigure(cc.Memory), Goal: "< 64 MiB", Met: bench.Verdict(cc.Memory.HWM < 64<<20)})
	}
	// A flood: Nodes no vote could go to, each with a record near the cap.
	// The controller counts them and holds none (docs/performance.md,
	// Bounded cost); its peak must stay under its container's limit.
	step("adding %d Nodes neither voters nor eligible, each with a record of %d bytes", bench.FloodNodes, bench.FloodBytes)
	flooded, err := env.FloodRecords(ctx, bench.FloodNodes, bench.FloodBytes)
	if err != nil {
		return nil, err
	}
	for i, b := range binaries {
		step("fleet-role controller (%s) for %d decisions beside the flood", b, o.controllerLoops)
		cc, err := env.RunController(ctx, b, o.controllerLoops)
		if err != nil {
			return nil, err
		}
		what := "`fleet-role controller`"
		if i > 0 {
			what = "`" + b + " controller`"
		}
		rows = append(rows, bench.Row{Measure: fmt.Sprintf("controller resident memory after %d decisions over %d records and %d records of Nodes neither voters nor eligible (%d bytes; %s, own process)", cc.Loops, hosts, bench.FloodNodes, flooded, what),
			Figure: memFigure(cc.Memory), Goal: "< 256 MiB (the container's limit)", Met: bench.Verdict(cc.Memory.HWM < 256<<20)})
	}
	return rows, nil
}

func memFigure(m bench.Memory) string {
	return fmt.Sprintf("VmRSS %s (anon %s, file %s), VmHWM %s", mib(m.RSS), mib(m.Anon), mib(m.File), mib(m.HWM))
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func ratios(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprintf("%.3g", x)
	}
	return strings.Join(s, " ")
}

func ints(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(int(math.Round(x)))
	}
	return strings.Join(s, " ")
}

func mustBytes(n int, err error) int {
	if err != nil {
		return -1
	}
	return n
}
