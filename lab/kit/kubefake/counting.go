package kubefake

import (
	"context"
	"errors"
	"sync"

	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/record"
)

// Tally counts a store's calls: the reads, the writes (puts, patches,
// deletes) and those that succeeded, each write's error and each written
// value's size.
type Tally struct {
	mu                     sync.Mutex
	gets, patches, patchOK int
	lastErr                error
	errs                   []error
	bytes                  []int
}

func (c *Tally) got() {
	c.mu.Lock()
	c.gets++
	c.mu.Unlock()
}

// wrote counts one write; size is the value's length, or -1 for a removal.
func (c *Tally) wrote(err error, size int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.patches++
	if err == nil {
		c.patchOK++
		if size >= 0 {
			c.bytes = append(c.bytes, size)
		}
	} else {
		c.lastErr = err
		c.errs = append(c.errs, err)
	}
}

// Errors returns every error a write returned that was not a cancellation:
// a loop stopping cancels the write in flight, and then writes what it holds
// with a context of its own.
func (c *Tally) Errors() []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []error
	for _, err := range c.errs {
		if !errors.Is(err, context.Canceled) {
			out = append(out, err)
		}
	}
	return out
}

// Cancelled is how many writes a cancellation cut short.
func (c *Tally) Cancelled() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, err := range c.errs {
		if errors.Is(err, context.Canceled) {
			n++
		}
	}
	return n
}

// Counts returns the reads, the writes and the writes that succeeded.
func (c *Tally) Counts() (gets, patches, ok int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gets, c.patches, c.patchOK
}

// LastErr is the last error a write returned.
func (c *Tally) LastErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastErr
}

// Sizes returns the sizes of the values written, smallest and largest.
func (c *Tally) Sizes() (min, max int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, b := range c.bytes {
		if i == 0 || b < min {
			min = b
		}
		if b > max {
			max = b
		}
	}
	return min, max
}

// CountingRecords wraps a probe's record store and counts its calls.
type CountingRecords struct {
	Inner kube.Records
	Tally
}

// Get counts and passes on.
func (s *CountingRecords) Get(ctx context.Context, node string) (string, error) {
	s.got()
	return s.Inner.Get(ctx, node)
}

// Put counts and passes on.
func (s *CountingRecords) Put(ctx context.Context, owner record.Owner, text string) error {
	err := s.Inner.Put(ctx, owner, text)
	s.wrote(err, len(text))
	return err
}

// Delete counts and passes on.
func (s *CountingRecords) Delete(ctx context.Context, node string) error {
	err := s.Inner.Delete(ctx, node)
	s.wrote(err, -1)
	return err
}

// CountingConfigMaps wraps the controller's status store and counts its
// calls.
type CountingConfigMaps struct {
	Inner kube.ConfigMaps
	Tally
}

// Get counts and passes on.
func (s *CountingConfigMaps) Get(ctx context.Context, name string) (map[string]string, error) {
	s.got()
	return s.Inner.Get(ctx, name)
}

// PatchKey counts and passes on.
func (s *CountingConfigMaps) PatchKey(ctx context.Context, name, key string, value *string) error {
	err := s.Inner.PatchKey(ctx, name, key, value)
	size := -1
	if value != nil {
		size = len(*value)
	}
	s.wrote(err, size)
	return err
}

var (
	_ kube.Records    = (*CountingRecords)(nil)
	_ kube.ConfigMaps = (*CountingConfigMaps)(nil)
)
