// Package mountinfo reads this process's mount table, /proc/self/mountinfo,
// for the lab packages that mount things and must show they left nothing
// mounted (the slow disk, the one-node cluster's kubelet).
package mountinfo

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Mount is one line of the table.
type Mount struct {
	Point, FSType, Source string
}

// Read reads this process's mount table.
func Read() ([]Mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	defer f.Close()
	ms, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	return ms, nil
}

// Parse reads the format of proc(5)'s /proc/PID/mountinfo:
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//
// field 5 is the mount point; after the optional fields and the "-"
// separator come the filesystem type and the source. The kernel escapes
// space, tab, newline and backslash in paths as octal (\040).
func Parse(r io.Reader) ([]Mount, error) {
	var out []Mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		sep := slices.Index(f, "-")
		if len(f) < 5 || sep < 6 || sep+2 >= len(f) {
			return nil, fmt.Errorf("mountinfo line %d: %q: not the format of proc(5)", n, sc.Text())
		}
		out = append(out, Mount{Point: unescape(f[4]), FSType: f[sep+1], Source: unescape(f[sep+2])})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// unescape undoes the kernel's \ooo escapes.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
