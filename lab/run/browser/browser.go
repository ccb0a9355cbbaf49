// Package browser loads pages in a real headless Chromium (Debian's, which
// hack/tools.sh installs) and returns what the browser made of them: the
// DOM after parsing (--dump-dom) or a screenshot. Each run has a fresh
// profile and the flags this machine's closed network needs. It is harness,
// not product.
package browser

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// Chromium is one Chromium binary and a directory for its profiles.
type Chromium struct {
	Binary string
	Dir    string
	runs   int
}

// flags are those every run takes: headless as root without a sandbox,
// no GPU, and none of the background connections (updates, sync, QUIC
// probes, first-run pages) that a closed network refuses, many at a time,
// at every start.
var flags = []string{
	"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
	"--disable-background-networking", "--disable-component-update", "--disable-sync",
	"--disable-extensions", "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
}

// run starts Chromium on url with extra flags and a profile of its own.
func (c *Chromium) run(ctx context.Context, url string, extra ...string) ([]byte, error) {
	c.runs++
	profile, err := os.MkdirTemp(c.Dir, "profile-"+strconv.Itoa(c.runs)+"-")
	if err != nil {
		return nil, fmt.Errorf("chromium profile: %w", err)
	}
	defer os.RemoveAll(profile)
	args := append(append(append([]string{}, flags...), "--user-data-dir="+profile), extra...)
	cmd := exec.CommandContext(ctx, c.Binary, append(args, url)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("chromium %s %s: %w\n%s", strings.Join(extra, " "), url, err, tail(errb.String()))
	}
	return out.Bytes(), nil
}

// DumpDOM is the DOM Chromium built from url, serialized.
func (c *Chromium) DumpDOM(ctx context.Context, url string) (string, error) {
	out, err := c.run(ctx, url, "--dump-dom")
	return string(out), err
}

// Screenshot writes a PNG of url at width x height to file.
func (c *Chromium) Screenshot(ctx context.Context, url, file string, width, height int) error {
	if _, err := c.run(ctx, url, "--screenshot="+file, fmt.Sprintf("--window-size=%d,%d", width, height)); err != nil {
		return err
	}
	if fi, err := os.Stat(file); err != nil || fi.Size() == 0 {
		return fmt.Errorf("chromium wrote no screenshot to %s (%v)", file, err)
	}
	return nil
}

// Version is what the binary says it is.
func (c *Chromium) Version(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, c.Binary, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("chromium --version: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

func tail(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return strings.Join(lines, "\n")
}
