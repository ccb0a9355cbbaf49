//go:build linux

package campaign

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/fleet-role/fleet-role/lab/fault/cpulimit"
	"github.com/fleet-role/fleet-role/lab/fault/slowdisk"
	"github.com/fleet-role/fleet-role/lab/kit/leftover"
	"github.com/fleet-role/fleet-role/lab/kit/mountinfo"
)

// Leftovers lists what a campaign run by process pid left on the machine:
// network namespaces named after it (lab/fault/netlab, with netPrefix), slow
// disks it served (lab/fault/slowdisk), CPU groups it made (lab/fault/cpulimit, with
// cgPrefix), mounts under dir, and processes it started that still run
// (its children, and any process whose command line names dir).
// A run that cleaned up after itself leaves none of them.
func Leftovers(pid int, netPrefix, cgPrefix, dir string) ([]string, error) {
	var out []string
	entries, err := os.ReadDir("/run/netns")
	if err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("campaign: %w", err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), netPrefix+"-"+strconv.Itoa(pid)+"-") {
			out = append(out, "network namespace "+e.Name())
		}
	}
	disks, err := slowdisk.Mounts()
	if err != nil {
		return nil, err
	}
	for _, d := range disks {
		if d.PID == pid {
			out = append(out, "slow disk mounted on "+d.Mountpoint)
		}
	}
	groups, err := cpulimit.Groups("", cgPrefix)
	if err != nil {
		return nil, err
	}
	for _, g := range groups {
		if leftover.PID(filepath.Base(g), cgPrefix) == pid {
			out = append(out, "cgroup "+g)
		}
	}
	if dir != "" {
		ms, err := mountinfo.Read()
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			if m.Point == dir || strings.HasPrefix(m.Point, dir+"/") {
				out = append(out, "mount "+m.Point+" ("+m.FSType+")")
			}
		}
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("campaign: %w", err)
	}
	for _, p := range procs {
		child, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", p.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		// The fields after the command name, which is in parentheses and
		// may hold spaces: state, then the parent's pid.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		name := s[strings.IndexByte(s, '(')+1 : strings.LastIndexByte(s, ')')]
		if f[1] == strconv.Itoa(pid) {
			out = append(out, "process "+strconv.Itoa(child)+" "+name)
			continue
		}
		// One whose parent has gone is the init's child now: known by the
		// fleet's directory on its command line (etcd's data, a probe's
		// kubeconfig, the API server's certificates).
		if dir != "" {
			if cl, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline")); err == nil && strings.Contains(string(cl), dir+"/") {
				out = append(out, "process "+strconv.Itoa(child)+" "+name+", orphaned, started in "+dir)
			}
		}
	}
	return out, nil
}
