package mountinfo

import (
	"fmt"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	const page = `22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda rw
98 22 0:52 / /tmp/a\040b rw,nosuid,nodev,relatime shared:60 - fuse.fleet-role-slowdisk fleet-role-slowdisk-4242-3 rw,user_id=0,group_id=0
99 22 0:53 / /mnt\134x rw - tmpfs tmp\011fs rw
100 22 0:54 / /end\04 rw - tmpfs x rw
`
	got, err := Parse(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	want := []Mount{
		{"/", "ext4", "/dev/vda"},
		{"/tmp/a b", "fuse.fleet-role-slowdisk", "fleet-role-slowdisk-4242-3"},
		{`/mnt\x`, "tmpfs", "tmp\tfs"},
		{`/end\04`, "tmpfs", "x"}, // a cut escape is kept as written
	}
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Errorf("parsed %q, want %q", got, want)
	}
	for _, bad := range []string{"1 2 3\n", "22 1 253:1 / / rw - ext4\n", "22 1 253:1 / / rw shared:1 ext4 /dev/vda rw\n"} {
		if _, err := Parse(strings.NewReader(bad)); err == nil {
			t.Errorf("Parse(%q) succeeded", bad)
		}
	}
}

func TestReadListsRoot(t *testing.T) {
	ms, err := Read()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Point == "/" {
			return
		}
	}
	t.Errorf("no mount at / among %d mounts", len(ms))
}

// TestUnescape reads mountinfo's octal escapes.
func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`/tmp/a\040b`:  "/tmp/a b",
		`/plain`:       "/plain",
		`/x\011y\134z`: "/x\ty\\z",
		`/end\04`:      `/end\04`,
		`/end\0401`:    "/end 1",
	} {
		if got := unescape(in); got != want {
			t.Errorf("unescape(%q) = %q, want %q", in, got, want)
		}
	}
}
