// Command reach is test/pods' attacker: run in a pod made from the probe's
// own pod template (its user, group, capabilities, seccomp filter, host
// network and mounts), it tries what a compromised probe would, and prints
// what it got as JSON: for every process it can see under each /proc
// directory named (its own excepted), to read /proc/PID/environ and, through
// /proc/PID/root, the ServiceAccount token in that process's filesystem.
// It reads and prints nothing of what it reads but the paths it could
// read, so a token it reaches never lands in a log.
//
// It is harness, built into a test image by lab/kit/image (Reach).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

const tokenPath = "var/run/secrets/kubernetes.io/serviceaccount/token"

type result struct {
	UID, GID int
	// Seen counts the processes each /proc directory shows, its own
	// excepted; Read lists every path it could read.
	Seen map[string]int
	Read []string
	// Absent lists the /proc directories named that do not exist here.
	Absent []string
}

func main() {
	dirs := os.Args[1:]
	if len(dirs) == 0 {
		dirs = []string{"/proc"}
	}
	r := result{UID: os.Getuid(), GID: os.Getgid(), Seen: map[string]int{}, Read: []string{}, Absent: []string{}}
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			r.Absent = append(r.Absent, dir)
			continue
		}
		self, _ := os.Readlink(filepath.Join(dir, "self"))
		for _, e := range entries {
			if _, err := strconv.Atoi(e.Name()); err != nil || e.Name() == self {
				continue
			}
			r.Seen[dir]++
			for _, p := range []string{filepath.Join(dir, e.Name(), "environ"), filepath.Join(dir, e.Name(), "root", tokenPath)} {
				if b, err := os.ReadFile(p); err == nil && len(b) > 0 {
					r.Read = append(r.Read, p)
				}
			}
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
