package cli

// prepare-fsync-dir, the probe's init container, run through Main as the
// container runs it: it must refuse bad flags before it touches the disk.
// What it does to a real directory, which needs root to chown, is
// test/integration/cli's.

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// prepare runs `fleet-role prepare-fsync-dir args...` and returns its exit
// code, stdout and stderr.
func prepare(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(append([]string{"prepare-fsync-dir"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func TestPrepareFsyncDirRefusesBadFlags(t *testing.T) {
	base := t.TempDir()
	t.Chdir(base)
	abs := filepath.Join(base, "fsync")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"relative dir", []string{"--dir=fsync", "--owner=65532:65532"}, `--dir "fsync": want an absolute path`},
		{"dot-relative dir", []string{"--dir=./fsync", "--owner=65532:65532"}, `--dir "./fsync": want an absolute path`},
		{"no dir", []string{"--owner=65532:65532"}, `--dir "": want an absolute path`},
		{"no owner", []string{"--dir=" + abs}, `--owner "": want UID:GID`},
		{"owner without a group", []string{"--dir=" + abs, "--owner=65532"}, `--owner "65532": want UID:GID`},
		{"empty group", []string{"--dir=" + abs, "--owner=65532:"}, `GID "": want a whole number`},
		{"names, not numbers", []string{"--dir=" + abs, "--owner=nobody:nogroup"}, `UID "nobody": want a whole number`},
		{"signed", []string{"--dir=" + abs, "--owner=+65532:65532"}, `UID "+65532": want a whole number`},
		{"three fields", []string{"--dir=" + abs, "--owner=1:2:3"}, `GID "2:3": want a whole number`},
		{"an argument", []string{"--dir=" + abs, "--owner=65532:65532", "extra"}, `unknown command "extra"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := prepare(t, tc.args...)
			if code != ExitUsage || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit %d with %q", code, errOut, ExitUsage, tc.want)
			}
			if out != "" {
				t.Errorf("stdout %q on a refusal", out)
			}
			for _, p := range []string{abs, filepath.Join(base, "fsync")} {
				if _, err := os.Lstat(p); !os.IsNotExist(err) {
					t.Errorf("a refusal left %s made (%v)", p, err)
				}
			}
		})
	}
}
