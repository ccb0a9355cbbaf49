package fsync

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Filesystem is what statfs says about the directory a reading was taken in.
type Filesystem struct {
	// Name is the filesystem type, from the statfs magic number.
	Name string
	// Memory is true for a filesystem held in memory, where fdatasync
	// reaches no disk (docs/facts.md: fdatasync on tmpfs does nothing).
	Memory bool
	// Note is a caveat about what a reading on this filesystem means, or "".
	Note string
}

// Statfs magic numbers, from the kernel's include/uapi/linux/magic.h and the
// filesystems that define their own.
var magics = map[uint32]Filesystem{
	0xEF53:     {Name: "ext2/3/4"}, // the three share one magic
	0x58465342: {Name: "xfs"},
	0x9123683E: {Name: "btrfs"},
	0x2FC12FC1: {Name: "zfs"},
	0xF2F52010: {Name: "f2fs"},
	0xCA451A4E: {Name: "bcachefs"},
	0x52654973: {Name: "reiserfs"},
	0x3434:     {Name: "nilfs2"},
	0x5346544E: {Name: "ntfs"},
	0x4D44:     {Name: "vfat"},
	0x2011BAB0: {Name: "exfat"},
	0x72B6:     {Name: "jffs2"},
	0x24051905: {Name: "ubifs"},
	0x6969:     {Name: "nfs"},
	0xFF534D42: {Name: "cifs"},
	0xFE534D42: {Name: "smb2"},
	0x00C36400: {Name: "ceph"},
	0x0BD00BD0: {Name: "lustre"},
	0x01021997: {Name: "9p"},
	0x65735546: {Name: "fuse", Note: "fuse (virtiofs among others) passes fdatasync to a daemon that statfs does not name; the reading is of whatever that daemon does"},
	0x794C7630: {Name: "overlay", Note: "overlay passes fdatasync to the filesystem of its upper layer, which statfs does not name; mount a host directory to measure the host's disk"},
	0x73717368: {Name: "squashfs"},
	0x01021994: {Name: "tmpfs", Memory: true},
	0x858458F6: {Name: "ramfs", Memory: true},
	0x958458F6: {Name: "hugetlbfs", Memory: true},
}

// FilesystemOf names the filesystem with the given statfs magic number. An
// unknown number is named by its hex value and not taken for memory.
func FilesystemOf(magic uint32) Filesystem {
	fs, ok := magics[magic]
	if !ok {
		return Filesystem{
			Name: fmt.Sprintf("unknown (0x%x)", magic),
			Note: fmt.Sprintf("statfs magic 0x%x is not one fleet-role knows; it cannot say whether this filesystem is on a disk", magic),
		}
	}
	if fs.Memory {
		fs.Note = fmt.Sprintf("%s keeps files in memory: fdatasync reaches no disk, so these latencies say nothing about one (docs/facts.md: fdatasync on tmpfs does nothing); measure a directory on the disk etcd would use", fs.Name)
	}
	return fs
}

// FilesystemAt names the filesystem dir is on.
func FilesystemAt(dir string) (Filesystem, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return Filesystem{}, fmt.Errorf("statfs %s: %w", dir, err)
	}
	// The magic numbers are 32-bit; Statfs_t.Type is wider or signed on
	// some architectures.
	return FilesystemOf(uint32(st.Type)), nil
}
