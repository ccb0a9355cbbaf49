//go:build linux

// Package slowdisk serves a slow disk: a FUSE passthrough filesystem, served
// by this process, that shows the files of a backing directory at a mount
// point and makes every fsync and fdatasync on it sleep for a delay before it
// is carried out. The delay can be changed at any time (SetDelay), so a fault
// campaign can mount it under an etcd member's data directory at the start
// and slow that member's disk later, for as long as it likes: etcd's own
// etcd_disk_wal_fsync_duration_seconds then rises by the delay, which is the
// signal fleet-role judges a voter's disk by (docs/limits.md, wal_fsync).
//
// Why FUSE: this machine has no device-mapper (dm-delay), and the faults
// k3s operators meet are slow syncs (SD cards, spinning disks, busy virtual
// disks), not slow reads. Over a tmpfs backing directory the mount adds only
// FUSE's own overhead (docs/testing.md, "What the harness rests on": etcd's WAL fsync at 0.24 ms
// through it against 0.18 ms on the plain disk).
//
// What must hold for the delay to reach etcd:
//   - etcd 3.6.15's WAL calls fdatasync(2) on its tail segment
//     (server/storage/wal/wal.go, WAL.sync) and fsync(2) on the WAL directory
//     when it makes or cuts a segment; bbolt calls fdatasync(2) on its file.
//     The kernel sends both as FUSE_FSYNC (a directory's as FUSE_FSYNCDIR),
//     and both are delayed here.
//   - FUSE passthrough stays off. As root on this kernel go-fuse would turn
//     it on, and a file opened in passthrough mode is written, and synced for
//     O_DSYNC writes, by the kernel on the backing file without asking this
//     server. With it off, an O_DSYNC write reaches this server as a sync too.
//   - The mount is made directly (mount(2), DirectMountStrict), not through
//     fusermount: nothing outside the module is needed, and a failure says
//     why instead of falling back.
//
// Every mount is named after this process (its source is
// fleet-role-slowdisk-PID-SEQ), so that Sweep can tell a crashed run's dead
// mount from a live one of a concurrent test process, as lab/fault/netlab does for
// network namespaces.
package slowdisk

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fleet-role/fleet-role/lab/kit/leftover"
	"github.com/fleet-role/fleet-role/lab/kit/mountinfo"
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Name is the FUSE subtype of every slow disk: /proc/self/mountinfo shows
// its filesystem type as "fuse." + Name. It must fit go-fuse's 20 bytes.
const Name = "fleet-role-slowdisk"

// FSType is the filesystem type a slow disk's mount shows.
const FSType = "fuse." + Name

// ErrNotRoot is returned by Mount when the process is not root: a direct
// FUSE mount needs CAP_SYS_ADMIN.
var ErrNotRoot = errors.New("slowdisk: mounting needs root")

// Config says what to serve where.
type Config struct {
	// Backing is the directory whose files the mount shows. Required. It
	// must not be the mount point, under it or above it: the server reads
	// it while the mount hides what is under the mount point.
	Backing string
	// Mountpoint is the directory the slow disk is mounted on. Required.
	Mountpoint string
	// Delay is the delay every fsync and fdatasync sleeps from the start;
	// SetDelay changes it.
	Delay time.Duration
	// Logger receives go-fuse's diagnostics; nil uses log.Default().
	Logger *log.Logger
}

// Stats counts what the slow disk did since it was mounted.
type Stats struct {
	// Syncs is every fsync and fdatasync served (files and directories).
	Syncs uint64
	// Delayed is the syncs that slept a delay before being carried out.
	Delayed uint64
	// DelayedFor is the time those syncs slept in all.
	DelayedFor time.Duration
	// Longest is the longest one of them slept: past the delay it is how
	// late a sleep woke, the noise the delay itself adds.
	Longest time.Duration
}

// Disk is one mounted slow disk.
type Disk struct {
	backing, mountpoint, source string

	delay      atomic.Int64 // nanoseconds
	syncs      atomic.Uint64
	delayed    atomic.Uint64
	delayedFor atomic.Int64 // nanoseconds
	longest    atomic.Int64 // nanoseconds

	server  *fuse.Server
	closing chan struct{} // closed by Close: sleeping syncs go on at once
	served  chan struct{} // closed when the serve loop has ended

	closeOnce sync.Once
	closeErr  error
}

// Mount serves cfg.Backing at cfg.Mountpoint with every sync delayed by
// cfg.Delay, and returns once the kernel has the mount. It first sweeps
// the dead mounts of crashed runs (Sweep). Call Close whether or not the
// caller fails later.
func Mount(cfg Config) (*Disk, error) {
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	if cfg.Delay < 0 {
		return nil, fmt.Errorf("slowdisk: delay %v: must not be negative", cfg.Delay)
	}
	backing, err := realDir("backing directory", cfg.Backing)
	if err != nil {
		return nil, err
	}
	mountpoint, err := realDir("mount point", cfg.Mountpoint)
	if err != nil {
		return nil, err
	}
	if within(backing, mountpoint) {
		return nil, fmt.Errorf("slowdisk: backing directory %s is the mount point %s or under it: the mount would hide it from its own server", backing, mountpoint)
	}
	if within(mountpoint, backing) {
		return nil, fmt.Errorf("slowdisk: mount point %s is under the backing directory %s: the server would serve its own mount", mountpoint, backing)
	}
	if err := Sweep(); err != nil {
		return nil, err
	}
	var st syscall.Stat_t
	if err := syscall.Stat(backing, &st); err != nil {
		return nil, fmt.Errorf("slowdisk: stat backing directory %s: %w", backing, err)
	}
	d := &Disk{
		backing:    backing,
		mountpoint: mountpoint,
		source:     leftover.Name(Name), // in use until Close
		closing:    make(chan struct{}),
		served:     make(chan struct{}),
	}
	d.delay.Store(int64(cfg.Delay))
	root := &fs.LoopbackRoot{Path: backing, Dev: uint64(st.Dev)}
	rootNode := &slowNode{LoopbackNode: &fs.LoopbackNode{RootData: root}, disk: d}
	root.RootNode = rootNode
	logger := cfg.Logger
	if logger == nil {
		logger = log.Default()
	}
	opts := &fs.Options{
		Logger: logger,
		MountOptions: fuse.MountOptions{
			FsName:            d.source,
			Name:              Name,
			DirectMountStrict: true,
			// Passthrough hands a file's writes and O_DSYNC syncs to the
			// kernel on the backing file, past this server and its delay.
			DisabledCapabilities: fuse.CAP_PASSTHROUGH,
			Logger:               logger,
		},
	}
	rawFS := fs.NewNodeFS(rootNode, opts)
	server, err := fuse.NewServer(rawFS, mountpoint, &opts.MountOptions)
	if err != nil {
		leftover.Release(d.source)
		return nil, fmt.Errorf("slowdisk: mount %s on %s: %w", backing, mountpoint, err)
	}
	d.server = server
	go func() {
		server.Serve()
		close(d.served)
	}()
	if err := server.WaitMount(); err != nil {
		return nil, errors.Join(fmt.Errorf("slowdisk: mount %s on %s: %w", backing, mountpoint, err), d.Close())
	}
	return d, nil
}

// realDir is path made absolute with its symlinks resolved, as
// /proc/self/mountinfo shows mount points, after checking it is a directory.
func realDir(what, path string) (string, error) {
	if path == "" {
		return "", fmt.Errorf("slowdisk: no %s given", what)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("slowdisk: %s %s: %w", what, path, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("slowdisk: %s %s: %w", what, path, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", fmt.Errorf("slowdisk: %s %s: %w", what, path, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("slowdisk: %s %s is not a directory", what, path)
	}
	return real, nil
}

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// Mountpoint is where the disk is mounted, symlinks resolved.
func (d *Disk) Mountpoint() string { return d.mountpoint }

// Source is the mount's source as /proc/self/mountinfo shows it
// (fleet-role-slowdisk-PID-SEQ).
func (d *Disk) Source() string { return d.source }

// SetDelay sets the delay of every sync from now on; a sync already sleeping
// keeps the delay it started with. A negative delay counts as zero.
func (d *Disk) SetDelay(delay time.Duration) {
	d.delay.Store(int64(max(delay, 0)))
}

// Delay is the delay in force.
func (d *Disk) Delay() time.Duration { return time.Duration(d.delay.Load()) }

// Stats says how many syncs were served and delayed.
func (d *Disk) Stats() Stats {
	return Stats{
		Syncs:      d.syncs.Load(),
		Delayed:    d.delayed.Load(),
		DelayedFor: time.Duration(d.delayedFor.Load()),
		Longest:    time.Duration(d.longest.Load()),
	}
}

// wait sleeps the delay in force before a sync is carried out. It ends early
// when the caller gives up (the kernel interrupts the request) or the disk
// is closed: a closed disk delays nothing, so that whatever still holds files
// on it after a lazy unmount is not held up by a fault that has ended.
func (d *Disk) wait(ctx context.Context) {
	d.syncs.Add(1)
	delay := d.Delay()
	if delay <= 0 {
		return
	}
	select {
	case <-d.closing:
		return
	default:
	}
	start := time.Now()
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-d.closing:
	}
	slept := int64(time.Since(start))
	d.delayed.Add(1)
	d.delayedFor.Add(slept)
	for {
		old := d.longest.Load()
		if slept <= old || d.longest.CompareAndSwap(old, slept) {
			break
		}
	}
}

// Close stops delaying, detaches the mount (a lazy unmount, MNT_DETACH) and
// returns: the mount point shows what is under it again at once, also while
// a process still holds files open on the slow disk. Those files go on being
// served, without delay, until they are closed; Wait waits for that. Close
// is idempotent.
func (d *Disk) Close() error {
	d.closeOnce.Do(func() {
		close(d.closing)
		if err := detach(d.mountpoint, d.source); err != nil {
			d.closeErr = fmt.Errorf("slowdisk: unmount %s: %w", d.mountpoint, err)
		}
		leftover.Release(d.source)
	})
	return d.closeErr
}

// Wait waits, after Close, until the server has stopped: every file opened
// on the slow disk has been closed and the kernel has ended the connection.
// It returns ctx's error when ctx ends first.
func (d *Disk) Wait(ctx context.Context) error {
	select {
	case <-d.served:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("slowdisk: %s still serving files opened before its unmount: %w", d.source, ctx.Err())
	}
}

// detach lazily unmounts the mount of this source at mountpoint, if it is
// still there. Checking the source first means a mount someone else made
// there since is never touched.
func detach(mountpoint, source string) error {
	ms, err := Mounts()
	if err != nil {
		return err
	}
	for _, m := range ms {
		if m.Mountpoint == mountpoint && m.Source == source {
			if err := unix.Unmount(mountpoint, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
				return err
			}
		}
	}
	return nil
}

// MountInfo is a slow disk's mount as /proc/self/mountinfo lists it.
type MountInfo struct {
	Mountpoint string
	Source     string
	// PID is the process that serves (or served) it, from its source.
	PID int
}

// Mounts lists the slow disks mounted in this mount namespace, those of
// other processes and dead ones included.
func Mounts() ([]MountInfo, error) {
	all, err := mountinfo.Read()
	if err != nil {
		return nil, fmt.Errorf("slowdisk: %w", err)
	}
	var out []MountInfo
	for _, m := range all {
		if m.FSType == FSType {
			out = append(out, MountInfo{Mountpoint: m.Point, Source: m.Source, PID: leftover.PID(m.Source, Name)})
		}
	}
	return out, nil
}

// Sweep detaches the slow disks that crashed runs left mounted: those whose
// source names a process that no longer runs, or this process but no open
// Disk (leftover.Stale). Such a mount is dead (every access fails with
// "transport endpoint is not connected"); a lazy unmount as root clears it,
// as `fusermount3 -u` would. A slow disk of a live concurrent process is
// never touched. Mount calls it.
func Sweep() error {
	ms, err := Mounts()
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range ms {
		if !leftover.Stale(m.Source, Name) {
			continue
		}
		if err := unix.Unmount(m.Mountpoint, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			errs = append(errs, fmt.Errorf("slowdisk: unmount %s (%s, left by pid %d): %w", m.Mountpoint, m.Source, m.PID, err))
		}
	}
	return errors.Join(errs...)
}

// slowNode is a loopback node whose syncs wait for the disk's delay. Every
// node the loopback makes below it is wrapped the same way (WrapChild).
type slowNode struct {
	*fs.LoopbackNode
	disk *Disk
}

var (
	_ fs.NodeFsyncer        = (*slowNode)(nil)
	_ fs.NodeWrapChilder    = (*slowNode)(nil)
	_ fs.NodeOpendirHandler = (*slowNode)(nil)
	_ dirHandle             = (*slowDir)(nil)
)

// WrapChild wraps every node the loopback creates, so that the syncs of
// files and directories anywhere below the mount point are delayed.
func (n *slowNode) WrapChild(ctx context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	if lb, ok := ops.(*fs.LoopbackNode); ok {
		return &slowNode{LoopbackNode: lb, disk: n.disk}
	}
	return ops
}

// Fsync serves fsync(2) and fdatasync(2) of a file (the kernel sends both
// as FUSE_FSYNC, with the datasync flag for the latter): the delay, then
// the backing file's own sync. A directory's sync comes to slowDir instead.
func (n *slowNode) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	n.disk.wait(ctx)
	if s, ok := f.(fs.FileFsyncer); ok {
		return s.Fsync(ctx, flags)
	}
	return syscall.ENOTSUP
}

// OpendirHandle opens a directory as the loopback does, wrapped so that its
// sync (FUSE_FSYNCDIR, which goes to the handle, not the node) is delayed
// too: etcd fsyncs its WAL directory when it makes or cuts a segment and
// counts that in etcd_disk_wal_fsync_duration_seconds.
func (n *slowNode) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	h, fuseFlags, errno := n.LoopbackNode.OpendirHandle(ctx, flags)
	if errno != 0 {
		return h, fuseFlags, errno
	}
	dh, ok := h.(dirHandle)
	if !ok {
		return h, fuseFlags, errno
	}
	return &slowDir{dirHandle: dh, disk: n.disk}, fuseFlags, 0
}

// dirHandle is what the loopback's directory handle does that go-fuse asks
// a directory handle for.
type dirHandle interface {
	fs.FileReaddirenter
	fs.FileReleasedirer
	fs.FileSeekdirer
	fs.FileFsyncdirer
}

// slowDir is a directory handle whose sync waits for the disk's delay.
type slowDir struct {
	dirHandle
	disk *Disk
}

func (d *slowDir) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	d.disk.wait(ctx)
	return d.dirHandle.Fsyncdir(ctx, flags)
}
