package probe

import "context"

// Beside is a Sampler with a reading that runs beside the loop rather than
// in a sample: the wake-up timer (Host), which must wake once a heartbeat
// interval all the time, not only while a sample is taken. Run starts it
// before its first sample and stops it when it returns, so that it lives
// exactly as long as the loop.
type Beside interface {
	StartBeside(ctx context.Context) (stop func())
}

// startBeside starts the sampler's reading beside the loop, if it has one;
// the caller calls stop when the loop ends.
func (p *Prober) startBeside(ctx context.Context) (stop func()) {
	b, ok := p.cfg.Sampler.(Beside)
	if !ok {
		return func() {}
	}
	return b.StartBeside(ctx)
}
