package campaign

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Duration is a time.Duration that JSON writes as a Go duration string
// ("1.5s"), which a reader of the board can read without knowing it counts
// nanoseconds.
type Duration time.Duration

// D is d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes the duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Write writes the board (scoreboard.json), every published decision
// (decisions.jsonl), the timeline (timeline.svg) and the table (table.txt)
// to dir.
func (r *Result) Write(dir string) error {
	board := struct {
		*Result
		Decisions int `json:"decisions"`
	}{r, len(r.decisions)}
	b, err := json.MarshalIndent(board, "", "  ")
	if err != nil {
		return fmt.Errorf("campaign: encode the board: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "scoreboard.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("campaign: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, "decisions.jsonl"))
	if err != nil {
		return fmt.Errorf("campaign: %w", err)
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, d := range r.decisions {
		if err := enc.Encode(d); err != nil {
			f.Close()
			return fmt.Errorf("campaign: encode a decision: %w", err)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("campaign: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("campaign: %w", err)
	}
	var svg strings.Builder
	r.Timeline(&svg)
	if err := os.WriteFile(filepath.Join(dir, "timeline.svg"), []byte(svg.String()), 0o644); err != nil {
		return fmt.Errorf("campaign: %w", err)
	}
	var table strings.Builder
	r.WriteTable(&table)
	return os.WriteFile(filepath.Join(dir, "table.txt"), []byte(table.String()), 0o644)
}

// Rescore reads a campaign's board (scoreboard.json) and the statuses it
// published (decisions.jsonl) from dir and scores them again with this
// scorer: the raw record stands, and a rule of scoring changed after a run
// can be applied to it. The board's held spans are the fleet's own state,
// read during the run, and are kept.
func Rescore(dir string) (*Result, error) {
	b, err := os.ReadFile(filepath.Join(dir, "scoreboard.json"))
	if err != nil {
		return nil, fmt.Errorf("campaign: rescore: %w", err)
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("campaign: rescore: %s: %w", filepath.Join(dir, "scoreboard.json"), err)
	}
	f, err := os.Open(filepath.Join(dir, "decisions.jsonl"))
	if err != nil {
		return nil, fmt.Errorf("campaign: rescore: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		var d Decision
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			return nil, fmt.Errorf("campaign: rescore: decisions.jsonl line %d: %w", n, err)
		}
		r.decisions = append(r.decisions, d)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("campaign: rescore: decisions.jsonl: %w", err)
	}
	if r.Settings.SamplePeriod <= 0 {
		return nil, fmt.Errorf("campaign: rescore: %s has no sample period in its settings", filepath.Join(dir, "scoreboard.json"))
	}
	// The leader changes were counted from the members' metrics as the
	// campaign ran, which the board keeps as counts: they stand as written.
	during, clean, own := r.Totals.LeaderChanges, r.Totals.Clean, r.Totals.OwnMoves
	r.Faults, r.Totals = Score(r.Faults, r.decisions, r.Settings.SamplePeriod, r.Fleet.Standbys)
	r.Totals.LeaderChanges, r.Totals.Clean, r.Totals.OwnMoves = during, clean, own
	r.OK = r.Aborted == "" && r.Totals.OK(r.Faults)
	return &r, nil
}

// Decisions is every status the controller published during the campaign.
func (r *Result) Decisions() []Decision { return r.decisions }

// WriteTable prints the per-kind table, every fault that was not ok with
// its notes, and the totals.
func (r *Result) WriteTable(w io.Writer) {
	s := r.Settings
	fmt.Fprintf(w, "seed %d; %d voters, %d standbys; election timeout %v, heartbeat %v, period %v, window %d at the p%s; swaps published within %.0f periods\n",
		r.Seed, len(r.Fleet.Voters), len(r.Fleet.Standbys), s.ElectionTimeout, s.HeartbeatInterval, s.SamplePeriod, s.Window,
		pct(s.TailPercentile), r.Ranges.Bounds.Publish)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tINJECTED\tSWAP-WORTHY\tCAUGHT\tGATED\tMISSED\tWRONG SWAPS\tFLAPS\tLEADER CHANGES\tNOT OK\tPERIODS TO PUBLISH (MEDIAN / MAX)")
	for _, k := range ByKind(r.Faults) {
		per := "-"
		if k.Published > 0 {
			per = fmt.Sprintf("%.1f / %.1f", k.MedianPeriods, k.MaxPer)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", k.Name(), k.Injected, k.SwapWorthy, k.Caught, k.Gated, k.Missed, k.WrongSwaps, k.Flaps, k.LeaderChanges, k.Failed, per)
	}
	t := r.Totals
	fmt.Fprintf(tw, "total\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\t\n", t.Faults, t.SwapWorthy, t.Caught, t.Gated, t.Missed, t.WrongSwaps, t.Flaps, t.LeaderChanges)
	tw.Flush()
	fmt.Fprintf(w, "etcd's leader changed %d times during the faults and %d times between them (from the baseline to the first fault and from each recovery to the next: fleet-role must cause none); the campaign's own %d moves of leadership are not counted\n",
		t.LeaderChanges, len(t.Clean), t.OwnMoves)
	for _, c := range t.Clean {
		after := "before the first fault"
		if c.After > 0 && c.After <= len(r.Faults) {
			after = fmt.Sprintf("after fault %d (%s)", c.After, r.Faults[c.After-1].Kind)
		}
		fmt.Fprintf(w, "  a leader change between faults at %s, %s, %.1f s into the clean span\n", c.At.Format("15:04:05.000"), after, c.Since.D().Seconds())
	}
	fmt.Fprintf(w, "%d decisions published, %d of them between faults", t.Decisions, t.CleanDecisions)
	if n := t.SwapWorthy - t.Gated; n > 0 {
		fmt.Fprintf(w, "; caught %.1f%% of the swap-worthy faults the gates did not hold (%d of %d) within their bound", 100*float64(t.Caught)/float64(n), t.Caught, n)
	}
	if t.SwapWorthy > 0 {
		fmt.Fprintf(w, "; %.1f%% of all the swap-worthy (%d of %d), a fault a gate held counted as not caught", 100*float64(t.Caught)/float64(t.SwapWorthy), t.Caught, t.SwapWorthy)
	}
	fmt.Fprintln(w)
	if loads := faultLoads(r.Faults); len(loads) > 0 {
		fmt.Fprintf(w, "the machine's load average at the faults' starts: median %.1f, max %.1f, on %d cores\n",
			loads[len(loads)/2], loads[len(loads)-1], runtime.NumCPU())
	}
	// How near the freshness limit the writes came, where etcd's leader
	// was slowed: every write crosses its path.
	worst := -1
	for i, f := range r.Faults {
		if f.Leader && (worst < 0 || f.Unwritten.Longest > r.Faults[worst].Unwritten.Longest) {
			worst = i
		}
	}
	if worst >= 0 {
		f := r.Faults[worst]
		fmt.Fprintf(w, "with etcd's leader delayed, a voter's record went unwritten %.1f s at most (fault %d, %s), against entry_unchanged %v\n",
			f.Unwritten.Longest.D().Seconds(), worst+1, f.Unwritten.Voter, r.Settings.StaleAfter().Duration())
	}
	for i, f := range r.Faults {
		if f.OK {
			continue
		}
		fmt.Fprintf(w, "fault %d, %s: %s (truth: %s; load %.1f)\n", i+1, f.Spec, f.Outcome, truthLine(f.Truth), f.Load)
		if t := f.Throttled; t != nil {
			fmt.Fprintf(w, "  its cgroup held it off the CPU in %d of %d periods, %.1f s summed over the cores (more than the fault's length when both held it)\n", t.Throttled, t.Periods, t.For.D().Seconds())
		}
		for _, n := range f.Notes {
			fmt.Fprintf(w, "  %s\n", n)
		}
	}
	if r.Aborted != "" {
		fmt.Fprintf(w, "stopped early: %s\n", r.Aborted)
	}
	if r.OK {
		fmt.Fprintln(w, "PASS: no wrong swap, no flap, every swap-worthy fault caught within its bound, no leader change between faults")
	} else {
		fmt.Fprintln(w, "FAIL")
	}
}

func pct(p float64) string {
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.2f", p*100), "0"), ".")
}

// faultLoads is the load averages read at the faults' starts, sorted.
func faultLoads(fs []Fault) []float64 {
	var out []float64
	for _, f := range fs {
		if f.Load >= 0 {
			out = append(out, f.Load)
		}
	}
	slices.Sort(out)
	return out
}
