// Command maxrss runs a command and prints its peak resident memory in
// bytes on standard error's last line, its standard output passed through.
// A process started from a large one (a test under the race detector)
// inherits its parent's peak at exec (Linux keeps the larger of the two in
// the rusage it reports), so the tests measure a binary through this small
// program instead of starting it themselves.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

func main() {
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if ru != nil {
		fmt.Fprintf(os.Stderr, "\nmaxrss %d\n", ru.Maxrss<<10)
	}
	if err != nil {
		os.Exit(1)
	}
}
