// Command demo-screenshot takes the picture of the status page that the
// README and docs/operators.md show: the demo's default run (three voters,
// two standbys, voter-2's peer path slowed), its page loaded in Debian's
// Chromium once the swap has shown and the controller has decided for a
// while longer, so that the verdicts over time hold the fault's start.
//
//	go run ./lab/cmd/demo-screenshot [-out docs/status-page.png] [-after 30s]
//
// It needs what the demo needs (etcd, built when it is not) and chromium
// (hack/tools.sh chromium installs it).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/fleet-role/fleet-role/internal/statuspage"
	"github.com/fleet-role/fleet-role/lab/fleets/demo"
	"github.com/fleet-role/fleet-role/lab/run/browser"
)

func main() {
	os.Exit(run())
}

func run() int {
	fs := flag.NewFlagSet("demo-screenshot", flag.ContinueOnError)
	out := fs.String("out", "docs/status-page.png", "the PNG to write")
	after := fs.Duration("after", 30*time.Second, "how long the controller decides after the swap has shown before the picture is taken")
	width := fs.Int("width", 1280, "the window's width, in CSS pixels")
	height := fs.Int("height", 2000, "the window's height, in CSS pixels")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "demo-screenshot: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if *after < 0 || *width <= 0 || *height <= 0 {
		fmt.Fprintf(os.Stderr, "demo-screenshot: -after %s, -width %d, -height %d: want -after zero or above and a window above zero\n", *after, *width, *height)
		return 2
	}
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo-screenshot: %v (hack/tools.sh chromium installs it)\n", err)
		return 1
	}
	file, err := filepath.Abs(*out)
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo-screenshot: -out %s: %v\n", *out, err)
		return 2
	}
	profiles, err := os.MkdirTemp("", "demo-screenshot-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo-screenshot: %v\n", err)
		return 1
	}
	defer os.RemoveAll(profiles)
	chrome := &browser.Chromium{Binary: chromium, Dir: profiles}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opt := demo.Defaults()
	opt.Out = os.Stderr
	opt.WhileFaulted = func(ctx context.Context, live *demo.Live) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(*after):
		}
		url := live.ControllerURL + statuspage.Path
		if err := chrome.Screenshot(ctx, url, file, *width, *height); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "demo-screenshot: %s of %s\n", file, url)
		return nil
	}
	if _, err := demo.Run(ctx, opt); err != nil {
		fmt.Fprintf(os.Stderr, "demo-screenshot: %v\n", err)
		return 1
	}
	return 0
}
