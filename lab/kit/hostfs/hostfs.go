// Package hostfs reads what the scenarios that run a kubelet or k3s on
// this machine must leave as they found it: the mounts (through
// lab/kit/mountinfo), the cgroup hierarchies, the iptables chains of this
// machine's network namespace and the running processes. It is harness: lab/fleets/cluster and lab/fleets/k3sfleet check
// and clean the host with it.
package hostfs

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/fleet-role/fleet-role/lab/kit/mountinfo"
)

// mounts is this process's mount table; a table that cannot be read lists
// nothing, so that a cleanup goes on with what it can do.
func mounts() []mountinfo.Mount {
	ms, _ := mountinfo.Read()
	return ms
}

// MountsUnder lists the mount points of this process's namespace at or
// below dir.
func MountsUnder(dir string) []string {
	var out []string
	for _, m := range mounts() {
		if m.Point == dir || strings.HasPrefix(m.Point, dir+"/") {
			out = append(out, m.Point)
		}
	}
	return out
}

// CgroupMounts are the mount points of every cgroup hierarchy (v1 and v2)
// in this process's namespace.
func CgroupMounts() []string {
	var out []string
	for _, m := range mounts() {
		if m.FSType == "cgroup" || m.FSType == "cgroup2" {
			out = append(out, m.Point)
		}
	}
	return out
}

// ListChains lists a table's chains and its rules (the -N and -A lines of
// iptables -S or ip6tables -S, without the flag) in this process's network
// namespace.
func ListChains(bin, table string) (chains, rules []string, err error) {
	out, err := exec.Command(bin, "-w", "-t", table, "-S").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, nil, fmt.Errorf("%s -t %s -S: %w: %s", bin, table, err, ee.Stderr)
		}
		return nil, nil, fmt.Errorf("%s -t %s -S: %w", bin, table, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(line, "-N "):
			chains = append(chains, strings.TrimPrefix(line, "-N "))
		case strings.HasPrefix(line, "-A "):
			rules = append(rules, strings.TrimPrefix(line, "-A "))
		}
	}
	return chains, rules, nil
}

// ProcessesMatching lists the processes, other than this one, whose
// command line contains s.
func ProcessesMatching(s string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	self := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if strings.Contains(string(b), s) {
			out = append(out, pid)
		}
	}
	return out
}
