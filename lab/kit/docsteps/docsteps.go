// Package docsteps reads the shell steps of docs/install.md's Uninstall,
// so that the tests run them as written rather than a copy that could
// drift from what an operator is told.
package docsteps

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Uninstall is docs/install.md's Uninstall, step by step.
type Uninstall struct {
	// Servers is step 1's block for every server (the manifests
	// directory's copy), Once its block run once against the cluster
	// (k3s's Addon).
	Servers, Once string
	// Cluster is step 2's block: the cluster's objects.
	Cluster string
	// Host is step 3's block for every host: its drop-in and directory.
	Host string
}

// ReadUninstall reads the Uninstall of docs/install.md under the checkout
// at root.
func ReadUninstall(root string) (Uninstall, error) {
	doc, err := os.ReadFile(filepath.Join(root, "docs", "install.md"))
	if err != nil {
		return Uninstall{}, err
	}
	_, section, ok := strings.Cut(string(doc), "\n## Uninstall\n")
	if !ok {
		return Uninstall{}, fmt.Errorf("docs/install.md has no section ## Uninstall")
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	block := func(step string) (string, error) {
		_, after, ok := strings.Cut(section, step)
		if !ok {
			return "", fmt.Errorf("docs/install.md's Uninstall has no step %q", step)
		}
		m := regexp.MustCompile("(?s)```sh\n(.*?)```").FindStringSubmatch(after)
		if m == nil {
			return "", fmt.Errorf("docs/install.md's Uninstall step %q has no sh block", step)
		}
		return m[1], nil
	}
	var u Uninstall
	first, err := block("**1. ")
	if err != nil {
		return u, err
	}
	servers, once, ok := strings.Cut(first, "# once\n")
	if !ok || !strings.HasPrefix(servers, "# on every server\n") {
		return u, fmt.Errorf("docs/install.md's Uninstall step 1 is not a part \"# on every server\" and a part \"# once\":\n%s", first)
	}
	u.Servers, u.Once = servers, once
	if u.Cluster, err = block("**2. "); err != nil {
		return u, err
	}
	if u.Host, err = block("**3. "); err != nil {
		return u, err
	}
	return u, nil
}

var removal = regexp.MustCompile(`^sudo rm -r?f (/\S+)$`)

// Removed is the paths a host's block removes: each of its lines is a
// comment or `sudo rm -f PATH` (`-rf` for a directory), so that a test can
// remove them under a lab host's root, which is not this machine's.
func Removed(block string) ([]string, error) {
	var paths []string
	for _, line := range strings.Split(block, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := removal.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("a host's step %q is not `sudo rm -f PATH` or `sudo rm -rf PATH`", line)
		}
		paths = append(paths, m[1])
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("a host's step removes nothing:\n%s", block)
	}
	return paths, nil
}
