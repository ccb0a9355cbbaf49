//go:build linux

// Command campaign runs fleet-role's fault campaign (lab/fault/campaign): a real
// fleet on this machine, faults from the catalogue injected at random from a
// seed, every published decision scored against the truth of its moment.
// hack/campaign.sh builds and runs it; see docs/campaign.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/fleet-role/fleet-role/lab/fault/campaign"
)

func main() {
	os.Exit(run())
}

func run() int {
	var cfg campaign.Config
	fs := flag.NewFlagSet("campaign", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: hack/campaign.sh [flags]

Runs fleet-role's fault campaign on a fleet of real etcd members, probes, an
API server and a controller on this machine (root), injects faults drawn from
the seed, and scores every status the controller publishes against the truth
of its moment. It writes DIR/scoreboard.json, DIR/decisions.jsonl,
DIR/timeline.svg, DIR/table.txt and the fleet's logs under DIR/logs, prints
the table, and exits 0 only with no wrong swap, no flap, no swap-worthy
fault missed and no leader change between faults.

Flags:
`)
		fs.PrintDefaults()
	}
	var voters int
	fs.Uint64Var(&cfg.Seed, "seed", 1, "the seed every fault's kind, host, start, length and severity is drawn from")
	fs.IntVar(&cfg.Faults, "faults", len(campaign.Kinds)+1, "how many faults; the first round injects every kind once (voter-delay as a follower and as etcd's leader)")
	fs.IntVar(&voters, "voters", 3, "etcd voters in the fleet: 3 or 5")
	fs.IntVar(&cfg.Standbys, "standbys", 2, "standby hosts in the fleet")
	fs.StringVar(&cfg.Out, "out", "campaign-out", "where the board, the decisions, the timeline and the logs go")
	fs.StringVar(&cfg.Binary, "fleet-role", "", "the fleet-role binary (hack/campaign.sh builds it)")
	fs.StringVar(&cfg.EtcdBinary, "etcd", os.Getenv("FLEET_ROLE_ETCD"), "the etcd binary (hack/tools.sh etcd)")
	fs.StringVar(&cfg.APIServerBinary, "kube-apiserver", os.Getenv("FLEET_ROLE_KUBE_APISERVER"), "the kube-apiserver binary (hack/tools.sh kube-apiserver)")
	fs.StringVar(&cfg.Kubectl, "kubectl", "kubectl", "the kubectl binary")
	fs.StringVar(&cfg.Manifest, "manifest", "deploy/fleet-role.yaml", "the rendered manifests")
	var only string
	fs.StringVar(&only, "only", "", "make every fault of this kind (one of the catalogue's, docs/campaign.md), to reproduce one kind many times; the first round is then not drawn")
	fs.BoolVar(&cfg.Leader, "leader", false, "with --only voter-delay: make every delayed voter etcd's leader first")
	var rescore string
	fs.StringVar(&rescore, "rescore", "", "score the campaign written to this directory again, from its scoreboard.json and decisions.jsonl, print its table and exit 0 only when it passes; nothing is run")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if rescore != "" {
		res, err := campaign.Rescore(rescore)
		if err != nil {
			fmt.Fprintln(os.Stderr, "campaign:", err)
			return 2
		}
		res.WriteTable(os.Stdout)
		if !res.OK {
			return 1
		}
		return 0
	}
	var bad []string
	if voters != 3 && voters != 5 {
		bad = append(bad, fmt.Sprintf("--voters %d: must be 3 or 5", voters))
	}
	if cfg.Faults < 1 {
		bad = append(bad, fmt.Sprintf("--faults %d: must be at least 1", cfg.Faults))
	}
	if only != "" && !slices.Contains(campaign.Kinds, campaign.Kind(only)) {
		bad = append(bad, fmt.Sprintf("--only %s: not a kind of the catalogue (%v)", only, campaign.Kinds))
	}
	if cfg.Leader && only != string(campaign.VoterDelay) {
		bad = append(bad, fmt.Sprintf("--leader: only with --only %s (got --only %q)", campaign.VoterDelay, only))
	}
	cfg.Only = campaign.Kind(only)
	if cfg.Standbys < 1 {
		bad = append(bad, fmt.Sprintf("--standbys %d: must be at least 1, a host to swap a voter for", cfg.Standbys))
	}
	for _, b := range []struct{ flag, path string }{{"--fleet-role", cfg.Binary}, {"--etcd", cfg.EtcdBinary},
		{"--kube-apiserver", cfg.APIServerBinary}, {"--manifest", cfg.Manifest}} {
		if b.path == "" {
			bad = append(bad, b.flag+": not given")
		} else if _, err := os.Stat(b.path); err != nil {
			bad = append(bad, fmt.Sprintf("%s %s: %v", b.flag, b.path, err))
		}
	}
	if os.Geteuid() != 0 {
		bad = append(bad, "the campaign makes network namespaces, FUSE mounts and cgroups: run it as root")
	}
	if len(bad) > 0 {
		for _, b := range bad {
			fmt.Fprintln(os.Stderr, "campaign:", b)
		}
		return 2
	}
	cfg.Voters = voters
	cfg.Progress = os.Stdout
	out, err := filepath.Abs(cfg.Out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "campaign:", err)
		return 2
	}
	cfg.Out = out

	// Ctrl-C or SIGTERM ends the campaign: the fault on is undone, the board
	// of what ran is written, and everything it made is removed.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := campaign.Run(ctx, cfg)
	if res != nil {
		res.WriteTable(os.Stdout)
		fmt.Printf("written to %s: scoreboard.json, decisions.jsonl, timeline.svg, table.txt, logs/\n", cfg.Out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "campaign:", err)
		return 1
	}
	if !res.OK {
		return 1
	}
	return 0
}
