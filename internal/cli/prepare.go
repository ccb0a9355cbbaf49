package cli

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// newPrepareFsyncDirCommand is what the probe's init container runs: it
// hands the fsync directory (a hostPath the kubelet makes owned by root) to
// the probe's non-root user, so that the probe itself needs no capability.
func newPrepareFsyncDirCommand() *cobra.Command {
	var dir, owner string
	cmd := &cobra.Command{
		Use:   "prepare-fsync-dir --dir DIR --owner UID:GID",
		Short: "Make the probe's fsync directory and give it to the probe's user (the DaemonSet's init container)",
		Long: `Makes DIR if it is absent, and sets its owner to UID:GID and its mode to 0700,
so that the probe, running as that user with no capabilities, can write and
remove its fdatasync reading's file there and nobody else can. It touches
nothing but DIR itself: not what is in it. Needs CAP_CHOWN (the init
container has that one capability). Exit 1 when it cannot, 2 for bad flags.`,
		Args: cobra.NoArgs,
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", "", "the fsync directory, as mounted in the container")
	f.StringVar(&owner, "owner", "", "the probe's user and group, UID:GID")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if dir == "" || !strings.HasPrefix(dir, "/") {
			return usageErrorf("--dir %q: want an absolute path", dir)
		}
		uid, gid, err := parseOwner(owner)
		if err != nil {
			return usageErrorf("--owner %q: %w", owner, err)
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("make %s: %w", dir, err)
		}
		fi, err := os.Lstat(dir)
		if err != nil {
			return fmt.Errorf("stat %s: %w", dir, err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory (%s)", dir, fi.Mode().Type())
		}
		// The mode first, while root still owns the directory: changing the
		// mode of a directory another user owns needs CAP_FOWNER, which the
		// init container does not have (only CHOWN). Run for real in
		// test/pods, chown-then-chmod failed there with EPERM and the probe
		// pod never started. On a later start the directory is the probe's
		// and already 0700, so the mode is left alone.
		if fi.Mode().Perm() != 0o700 {
			if err := os.Chmod(dir, 0o700); err != nil {
				return fmt.Errorf("chmod %s 0700 (owner %d; changing another owner's mode needs CAP_FOWNER): %w", dir, fi.Sys().(*syscall.Stat_t).Uid, err)
			}
		}
		if err := os.Lchown(dir, uid, gid); err != nil {
			return fmt.Errorf("give %s to %d:%d: %w", dir, uid, gid, err)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s: owner %d:%d, mode 0700\n", dir, uid, gid)
		return nil
	}
	return cmd
}

// maxOwnerID is the largest user or group ID chown can set: IDs are 32-bit
// (uid_t, gid_t), and the all-ones value 4294967295 is (uid_t)-1, which
// chown(2) reads as "leave unchanged". A larger figure would be truncated to
// 32 bits by the system call (4294967296 becomes 0, root), so it is refused
// rather than passed on.
const maxOwnerID = 1<<32 - 2

// parseOwner reads UID:GID, two whole numbers from 0 to maxOwnerID.
func parseOwner(s string) (uid, gid int, err error) {
	u, g, ok := strings.Cut(s, ":")
	if !ok {
		return 0, 0, fmt.Errorf("want UID:GID")
	}
	if uid, err = parseID(u); err != nil {
		return 0, 0, fmt.Errorf("UID %q: %w", u, err)
	}
	if gid, err = parseID(g); err != nil {
		return 0, 0, fmt.Errorf("GID %q: %w", g, err)
	}
	return uid, gid, nil
}

// parseID reads one user or group ID: decimal digits, 0 to maxOwnerID.
func parseID(s string) (int, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n > maxOwnerID {
		return 0, fmt.Errorf("want a whole number from 0 to %d (IDs are 32-bit; %d means \"unchanged\" to chown)", uint64(maxOwnerID), uint64(maxOwnerID)+1)
	}
	return int(n), nil
}
