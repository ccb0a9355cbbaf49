package record

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/fleet-role/fleet-role/internal/deflate"
	"github.com/fleet-role/fleet-role/internal/entry"
)

// A record has one of two layouts (docs/records.md, "Layouts").
//
// Every write of a ConfigMap is a write of the whole object into etcd's
// log, fsynced by every voter. A record that holds the whole window and is
// rewritten every period costs etcd the whole window every period, about
// 4.8 KB at the shipped settings (bench/run.sh -only-wal), where a
// kubelet's heartbeat costs about 1.5 KB (docs/performance.md). The tail
// layout writes the whole window only now and then, packed, and each
// period a small second object holding the samples since.
const (
	// FormatEntry: the record holds the window in data.entry, the entry's
	// text (docs/entry.md), rewritten every period. Every release reads
	// it; a probe writes it unless the controller says it reads the tail
	// layout.
	FormatEntry = 1
	// FormatTail: the record holds a snapshot of the window in
	// binaryData.window, packed (Pack), rewritten now and then; the tail,
	// a second ConfigMap named TailName, holds in binaryData.tail the
	// samples taken since that snapshot (PackTail), rewritten every period.
	FormatTail = 2
	// FormatRead is the highest layout this release reads.
	FormatRead = FormatTail

	// FormatAnnotation, on the controller's Lease, is the highest layout
	// the Lease's holder reads. The controller writes it at every
	// acquisition and renewal; a release before the tail layout writes the
	// Lease whole without it, so a probe reads FormatEntry from a Lease
	// such a controller holds, and writes what it reads.
	FormatAnnotation = "fleet-role.io/record-format"

	// TailSuffix makes a tail's name from its node's.
	TailSuffix = ".tail"
	// TailLabelValue is the record label's value on a tail.
	TailLabelValue = "tail"
	// AnySelector selects records and tails (and a ConfigMap labelled
	// otherwise that no probe can write: readers pass it over).
	AnySelector = Label
	// WindowKey is the binaryData key of a record in the tail layout.
	WindowKey = "window"
	// TailKey is a tail's one binaryData key.
	TailKey = "tail"

	// MaxEntryBytes is the most data a ConfigMap holds (docs/facts.md,
	// "Kubernetes limits"): the most an entry in data.entry can be, and so
	// the most a packed window or tail is unpacked to. Unpacking stops
	// there, whatever the packed bytes say.
	MaxEntryBytes = 1 << 20
	// maxNameBytes is the most a ConfigMap's name (a DNS subdomain) holds.
	maxNameBytes = 253
)

// TailLabels returns the labels of a tail.
func TailLabels() map[string]string {
	return map[string]string{Label: TailLabelValue, PartOfLabel: PartOf}
}

// TailName is the name of node's tail, and false when node's name leaves
// no room for the suffix (more than 248 characters): such a node's probe
// writes the entry layout alone.
func TailName(node string) (string, bool) {
	if len(node)+len(TailSuffix) > maxNameBytes {
		return "", false
	}
	return node + TailSuffix, true
}

// IsTail reports whether cm carries the tail label.
func IsTail(cm *corev1.ConfigMap) bool {
	return cm != nil && cm.Labels[Label] == TailLabelValue
}

// NodeOf is the node a record or a tail belongs to, from its name.
func NodeOf(cm *corev1.ConfigMap) string {
	if IsTail(cm) && len(cm.Name) > len(TailSuffix) && cm.Name[len(cm.Name)-len(TailSuffix):] == TailSuffix {
		return cm.Name[:len(cm.Name)-len(TailSuffix)]
	}
	return cm.Name
}

// dictionary primes the packing of an entry's text with the text of two
// small entries, a voter's and a standby's (docs/entry.md), so that a tail
// of a few samples does not pay for the field names it shares with every
// other entry: a standby's tail of one sample packs to about 80 bytes
// rather than 200. It is part of the tail layout: a different dictionary
// would be a different layout.
const dictionary = `{"v":1,"node":"server-2","n":2,"t0":"2026-12-06T00:00:00.011Z","dt_ms":[0,15013],"restart":[0],"link":[{"if":"enp3s0","class":"wired","n":2}],"connect_us":{"server-1":[703,602],"server-3":[2230,2039]},"mem_total_kib":[[33554432,2]],"mem_available_kib":[15280227,16945637],"mem_full_stall_us":[null,14928],"wakeup_late_us":[null,1111],"etcd":{"present":[[1,2]],"member_id":[{"id":"8437b7c545b29981","n":2}],"is_leader":[[0,2]],"is_learner":[[0,2]],"has_leader":[[1,2]],"connected_peers":[[2,2]],"known_peers":[[2,2]],"leader_changes":[[0,2]],"wal_fsync":[null,[0,32,1,413,2,181,3,352]],"backend_commit":[null,[1,10,2,231,3,229,4,65]],"peer_rtt":{"8437b7c545b29980":[null,[4,1]]},"db_size_kib":[57257,57310],"quota_bytes":[[2147483648,2]],"bounds":{"wal_fsync":[0.001,0.002,0.004,0.008,0.016,0.032,0.064,0.128,0.256,0.512,1.024,2.048,4.096,8.192],"backend_commit":[0.001,0.002,0.004,0.008,0.016,0.032,0.064,0.128,0.256,0.512,1.024,2.048,4.096,8.192],"peer_rtt":[0.0001,0.0002,0.0004,0.0008,0.0016,0.0032,0.0064,0.0128,0.0256,0.0512,0.1024,0.2048,0.4096,0.8192,1.6384,3.2768]}}}` +
	`{"v":1,"node":"standby","n":2,"t0":"2026-12-06T00:00:00.024Z","dt_ms":[0,14995],"restart":[0],"link":[{"if":"enp3s0","class":"wired","n":2}],"connect_us":{"server-1":[522,2694],"server-2":[2238,2202],"server-3":[1028,729]},"mem_total_kib":[[33554432,2]],"mem_available_kib":[15000300,16093353],"mem_full_stall_us":[null,0],"wakeup_late_us":[null,6260],"fsync":{"at":"2026-12-06T00:00:15Z","dir":"/var/lib/rancher/k3s/server/db/fleet-role-fsync","filesystem":"ext4","measured_disk":true,"writes":10029,"p99_us":2100,"max_us":9300}}`

// Pack is text, an entry's, as a record in the tail layout holds it: raw
// DEFLATE (RFC 1951) at the best compression, primed with dictionary.
func Pack(text string) []byte {
	var b bytes.Buffer
	packTo(&b, text)
	return b.Bytes()
}

// packers keeps internal/deflate's writers, primed with the dictionary,
// from one pack to the next: a probe packs a tail every period, and a
// writer made for each was a sixth of the bytes it allocated a sample
// (BenchmarkProbeSample's profile). One holds about 100 KB, where
// compress/flate's would hold 780 KB (internal/deflate says why that
// matters to the probe).
var packers = sync.Pool{New: func() any {
	w, err := deflate.NewWriterDict(io.Discard, deflate.BestCompression, []byte(dictionary))
	if err != nil {
		panic(err) // only for an invalid level
	}
	return w
}}

func packTo(b *bytes.Buffer, text string) {
	w := packers.Get().(*deflate.Writer)
	defer packers.Put(w)
	w.Reset(b) // primed with the dictionary again
	// Writes to a bytes.Buffer do not fail.
	_, _ = io.WriteString(w, text)
	_ = w.Close()
	w.Reset(io.Discard) // holds no reference to b while pooled
}

// Unpack is the text Pack packed, refused past MaxEntryBytes: what it
// allocates is bounded whatever the packed bytes say.
func Unpack(packed []byte) (string, error) { return unpackLimited(packed, MaxEntryBytes) }

// unpackLimited is Unpack refused past limit bytes.
func unpackLimited(packed []byte, limit int) (string, error) {
	r := flate.NewReaderDict(bytes.NewReader(packed), []byte(dictionary))
	defer r.Close()
	var b bytes.Buffer
	n, err := b.ReadFrom(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return "", fmt.Errorf("unpack: %w", err)
	}
	if n > int64(limit) {
		if limit == MaxEntryBytes {
			return "", fmt.Errorf("unpack: more than %d bytes, the most a ConfigMap holds", limit)
		}
		return "", fmt.Errorf("unpack: more than %d bytes, the record cap", limit)
	}
	return b.String(), nil
}

// Base names a packed window: a tail extends the window whose Base it
// carries, and no other.
func Base(window []byte) uint64 {
	h := fnv.New64a()
	h.Write(window)
	return h.Sum64()
}

// A packed tail is the Base of the window it extends (8 bytes, big
// endian), how many of that window's oldest samples the window no longer
// holds (an unsigned varint), and the entry's text of the samples taken
// since, packed.
const baseBytes = 8

// PackTail packs the tail that extends the packed window of base: drop of
// its oldest samples gone, text's samples after it.
func PackTail(base uint64, drop int, text string) []byte {
	var b bytes.Buffer
	b.Write(binary.BigEndian.AppendUint64(nil, base))
	b.Write(binary.AppendUvarint(nil, uint64(drop)))
	packTo(&b, text)
	return b.Bytes()
}

// UnpackTail reads what PackTail packed.
func UnpackTail(packed []byte) (base uint64, drop int, text string, err error) {
	return unpackTailLimited(packed, MaxEntryBytes)
}

func unpackTailLimited(packed []byte, limit int) (base uint64, drop int, text string, err error) {
	if len(packed) < baseBytes {
		return 0, 0, "", fmt.Errorf("tail of %d bytes: shorter than its %d-byte base", len(packed), baseBytes)
	}
	base = binary.BigEndian.Uint64(packed)
	d, n := binary.Uvarint(packed[baseBytes:])
	if n <= 0 || d > MaxEntryBytes {
		return 0, 0, "", errors.New("tail: no count of samples dropped after its base")
	}
	text, err = unpackLimited(packed[baseBytes+n:], limit)
	if err != nil {
		return 0, 0, "", fmt.Errorf("tail: %w", err)
	}
	return base, int(d), text, nil
}

// Merge is the window a reader reads from a record in the tail layout:
// the snapshot's text, its oldest drop samples left out, and each of the
// tail's samples appended as the probe appended it (entry.Append, which
// also drops an older sample's histograms whose bounds a newer one
// changed). The probe writes a tail only when Merge gives exactly the text
// it would have written whole (Writer), so that the two layouts read alike
// to the sample.
func Merge(window string, drop int, tail string) (string, error) {
	e, err := entry.Decode(window)
	if err != nil {
		return "", fmt.Errorf("window: %w", err)
	}
	t, err := entry.Decode(tail)
	if err != nil {
		return "", fmt.Errorf("tail: %w", err)
	}
	if err := extend(&e, drop, t); err != nil {
		return "", err
	}
	text, err := entry.Encode(e)
	if err != nil {
		return "", fmt.Errorf("merge: %w", err)
	}
	return text, nil
}

// extend is Merge on decoded entries: e, its oldest drop samples left out,
// and t's samples appended.
func extend(e *entry.Entry, drop int, t entry.Entry) error {
	switch {
	case t.Node != e.Node:
		return fmt.Errorf("tail of node %q extends the window of %q", t.Node, e.Node)
	case t.Fsync != nil || t.Shrunk != 0 || t.Refused != "" || t.Withheld != "":
		return errors.New("tail holds more than samples")
	case drop > len(e.Samples):
		return fmt.Errorf("tail drops %d samples of a window of %d", drop, len(e.Samples))
	}
	e.Samples = e.Samples[drop:]
	for _, s := range t.Samples {
		entry.Append(e, s, 0)
	}
	return nil
}
