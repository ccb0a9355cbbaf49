package fsync

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/fleet-role/fleet-role/internal/fsync"
)

func TestMeasureTmpfsSaysNoDisk(t *testing.T) {
	dir := tmpfsDir(t)
	r, err := fsync.Measure(context.Background(), fsync.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if r.Filesystem != "tmpfs" || r.MeasuredDisk || !strings.Contains(r.Note, "no disk") {
		t.Errorf("reading on tmpfs: %+v, want filesystem tmpfs, measured_disk false and a note", r)
	}
	if r.Writes != int(fsync.DefaultSizeBytes/fsync.DefaultBlockBytes) {
		t.Errorf("writes %d, want %d", r.Writes, fsync.DefaultSizeBytes/fsync.DefaultBlockBytes)
	}
	b, _ := json.Marshal(r)
	if !bytes.Contains(b, []byte(`"measured_disk":false`)) {
		t.Errorf("json %s lacks measured_disk false", b)
	}
	assertEmpty(t, dir)
}
