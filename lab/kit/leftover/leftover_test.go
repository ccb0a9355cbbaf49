package leftover

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

func TestNameAndStale(t *testing.T) {
	const prefix = "fleet-role-test"
	a, b := Name(prefix), Name(prefix)
	if a == b {
		t.Fatalf("two names alike: %s", a)
	}
	if got := PID(a, prefix); got != os.Getpid() {
		t.Errorf("PID(%q) = %d, want this process's %d", a, got, os.Getpid())
	}
	if Stale(a, prefix) {
		t.Errorf("%s is in use, yet stale", a)
	}
	Release(a)
	if !Stale(a, prefix) {
		t.Errorf("%s released, yet not stale", a)
	}
	if Stale(b, prefix) {
		t.Errorf("releasing %s made %s stale", a, b)
	}
	Release(b)

	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	for name, stale := range map[string]bool{
		fmt.Sprintf("%s-%d-1", prefix, dead.Process.Pid):       true,  // its process has exited
		fmt.Sprintf("%s-1-1", prefix):                          false, // pid 1 always runs
		fmt.Sprintf("%s-x-1", prefix):                          false, // not so named
		fmt.Sprintf("%s-%d", prefix, dead.Process.Pid):         false, // no sequence number
		fmt.Sprintf("%s-extra-%d-1", prefix, dead.Process.Pid): false, // another prefix
		fmt.Sprintf("other-%d-1", dead.Process.Pid):            false,
	} {
		if got := Stale(name, prefix); got != stale {
			t.Errorf("Stale(%q) = %v, want %v", name, got, stale)
		}
	}
}
