package actuator

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// HostPath is path, a path on the host, as this process sees it under
// hostRoot (where the host's / is mounted; "/" when it runs on the host).
func HostPath(hostRoot, path string) string {
	return filepath.Join(hostRoot, filepath.Clean("/"+path))
}

// WriteDropIn writes text to acting.DropInPath's place under hostRoot, its
// directory made when missing (k3s reads config.yaml.d when it exists).
func WriteDropIn(hostRoot, path, text string) error {
	p := HostPath(hostRoot, path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("write drop-in %s: %w", p, err)
	}
	// 0644 as k3s's own config.yaml: it holds no secret, and an operator
	// reads it to see what fleet-role set.
	return writeFileAtomic(p, []byte(text), 0o644)
}

// writeFileAtomic writes data to path so that a reader (k3s at its start,
// this actuator after a crash) sees the old file or the new one whole,
// never a part: a temporary file in the same directory, synced, renamed
// over path, and the directory synced so that the rename survives a power
// loss.
func writeFileAtomic(path string, data []byte, perm fs.FileMode) (err error) {
	dir, base := filepath.Split(path)
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Chmod(perm)
	}
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("write %s: %w", path, werr)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	if dir == "" {
		dir = "."
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// stateFile is the local state's file name in the state directory.
const stateFile = "actuator-state.json"

// FileState keeps the local state in a file of Dir (a hostPath, so that it
// outlives the pod), written whole and atomically.
type FileState struct {
	Dir  string
	Node string
}

// Path is the state file's path.
func (s FileState) Path() string { return filepath.Join(s.Dir, stateFile) }

// Load reads the state; none yet is an empty state.
func (s FileState) Load() (State, error) {
	f, err := os.Open(s.Path())
	if errors.Is(err, fs.ErrNotExist) {
		return State{Schema: StateSchema, Node: s.Node}, nil
	}
	if err != nil {
		return State{}, fmt.Errorf("read actuator state: %w", err)
	}
	defer f.Close()
	// One byte past the bound, so that a file too large is refused as
	// such rather than read cut short.
	b, err := io.ReadAll(io.LimitReader(f, maxStateBytes+1))
	if err != nil {
		return State{}, fmt.Errorf("read actuator state %s: %w", s.Path(), err)
	}
	st, err := UnmarshalState(b, s.Node)
	if err != nil {
		return State{}, fmt.Errorf("%s: %w", s.Path(), err)
	}
	return st, nil
}

// Save writes st.
func (s FileState) Save(st State) error {
	st.Node = s.Node
	b, err := MarshalState(st)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("write actuator state: %w", err)
	}
	return writeFileAtomic(s.Path(), b, 0o600)
}
