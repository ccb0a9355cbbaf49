// Package docs holds fleet-role's documentation; its test holds the README
// to being the front door and every link between the pages to a page and a
// heading that exist.
package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// firstScreen is how many lines of the README a newcomer sees before
// scrolling: the two commands must be among them.
const firstScreen = 50

// The README's first screen says what fleet-role does and shows the two
// set-up commands a newcomer needs, and no more.
func TestReadmeIsTheFrontDoor(t *testing.T) {
	lines := readLines(t, "../README.md")
	first := strings.Join(lines[:min(len(lines), firstScreen)], "\n")
	for _, want := range []string{"go run ./cmd/fleet-role-demo", "hack/test.sh", "fit, unfit or unknown"} {
		if !strings.Contains(first, want) {
			t.Errorf("the README's first %d lines lack %q", firstScreen, want)
		}
	}
	// The first block of commands is the two set-up commands, and no more.
	var setup []string
	for i, l := range lines {
		if l != "```sh" {
			continue
		}
		for _, c := range lines[i+1:] {
			if strings.HasPrefix(c, "```") {
				break
			}
			setup = append(setup, c)
		}
		break
	}
	if len(setup) != 2 || !strings.HasPrefix(setup[0], "go run ./cmd/fleet-role-demo ") || !strings.HasPrefix(setup[1], "hack/test.sh ") {
		t.Errorf("the README's first block of commands is %q, want the two set-up commands", setup)
	}
}

var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// Every relative link of the README and the pages under docs/ names a file
// that exists, and a heading of it that exists.
func TestLinksResolve(t *testing.T) {
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, "../README.md")
	checked := 0
	for _, page := range pages {
		inCode := false
		for i, l := range readLines(t, page) {
			if strings.HasPrefix(l, "```") {
				inCode = !inCode
			}
			if inCode {
				continue
			}
			for _, m := range link.FindAllStringSubmatch(l, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, anchor, _ := strings.Cut(target, "#")
				path := page
				if file != "" {
					path = filepath.Join(filepath.Dir(page), file)
				}
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s:%d: link %s: %v", page, i+1, target, err)
					continue
				}
				checked++
				if anchor == "" || !strings.HasSuffix(path, ".md") {
					continue
				}
				if !hasHeading(t, path, anchor) {
					t.Errorf("%s:%d: link %s: %s has no heading #%s", page, i+1, target, path, anchor)
				}
			}
		}
	}
	if checked < 20 {
		t.Fatalf("checked %d links: the pattern found too few to be reading the pages", checked)
	}
}

// No file of the repository cites the notes that live outside it, on the
// machine it was built on: the facts the code relies on are docs/facts.md,
// and those the harness relies on docs/testing.md, with their sources. (The
// names are split so that this file does not cite them.)
func TestNoCitationOutsideTheRepository(t *testing.T) {
	out, err := exec.Command("git", "-C", "..", "grep", "-n", "-I",
		"-e", "FACTS"+".md", "-e", "REAL-COMPONENTS"+".md", "-e", "reference-seed"+".md", "-e", "/work/"+"shared").CombinedOutput()
	if err == nil {
		t.Errorf("git grep finds citations of a file outside the repository:\n%s", out)
	} else if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("git grep: %v\n%s", err, out)
	}
}

// hasHeading reports whether the page at path has a heading whose anchor,
// as GitHub makes it, is anchor.
func hasHeading(t *testing.T, path, anchor string) bool {
	for _, l := range readLines(t, path) {
		if strings.HasPrefix(l, "#") && slug(strings.TrimLeft(l, "# ")) == anchor {
			return true
		}
	}
	return false
}

// slug is GitHub's anchor for a heading: lowercase, spaces to hyphens, and
// every character but letters, digits, hyphens and underscores dropped.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(b), "\n")
}
