package controller

import (
	"context"
	"errors"
	"net"
	"strconv"

	"github.com/fleet-role/fleet-role/internal/kube"
)

// PageAdvert is where the leader names its page for the Service that
// reaches it (kube/endpoints.go says why the leader writes it): the
// Service's Endpoints, Name in Endpoints' namespace, and this replica's own
// address.
type PageAdvert struct {
	Endpoints kube.PageEndpoints
	Name      string
	Self      kube.PageAddress
}

// advertise names this replica's page in the Service's Endpoints from the
// start of term t, in the background, retrying every jittered retry period
// until it has or the term ends; the function it returns waits for that.
// Each write is conditioned on the Endpoints as just read, and made only
// while the term lasts, so that a deposed leader's late write fails or is
// written over: the next leader reads after its term began, which is after
// this one's ended (docs/status.md, One writer). The one write not
// conditioned is the one that makes them, when there are none.
func (c *Controller) advertise(ctx context.Context, t *term) (wait func()) {
	p := t.el.e.Page
	if p == nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			err := c.nameSelf(ctx, t, p)
			if err == nil || ctx.Err() != nil || errors.Is(err, errNotLeading) {
				return
			}
			c.log.Warn("naming this controller's page in the Service's Endpoints failed; trying again after a retry period",
				"endpoints", t.el.e.Namespace+"/"+p.Name, "err", err)
			if !t.el.jittered(ctx) {
				return
			}
		}
	}()
	return func() { <-done }
}

// nameSelf makes the Endpoints name this replica's page, unless they do.
func (c *Controller) nameSelf(ctx context.Context, t *term, p *PageAdvert) error {
	until := t.el.validUntil()
	if until.IsZero() || !t.el.clock.Now().Before(until) {
		return errNotLeading
	}
	wctx, cancel := context.WithTimeout(ctx, until.Sub(t.el.clock.Now()))
	defer cancel()
	cur, rv, err := p.Endpoints.Get(wctx, p.Name)
	if errors.Is(err, kube.ErrNotFound) {
		// None yet (the first leader of an install), or deleted: made by
		// this write.
		rv, err = "", nil
	}
	if err != nil {
		return err
	}
	if cur == p.Self {
		return nil
	}
	if _, err := p.Endpoints.Set(wctx, p.Name, p.Self, rv); err != nil {
		return err
	}
	c.log.Info("the Service's Endpoints name this controller's page", "endpoints", t.el.e.Namespace+"/"+p.Name,
		"pod", p.Self.Pod, "address", addressText(p.Self), "was", cur.Pod)
	return nil
}

// withdraw takes this replica's page out of the Service's Endpoints when
// they name it: on a stop, before the Lease is given up, so that the next
// leader names its own after.
func (c *Controller) withdraw(ctx context.Context, p *PageAdvert) {
	if p == nil {
		return
	}
	cur, rv, err := p.Endpoints.Get(ctx, p.Name)
	if errors.Is(err, kube.ErrNotFound) {
		return // none: nothing names this replica
	}
	if err == nil && cur == p.Self {
		_, err = p.Endpoints.Set(ctx, p.Name, kube.PageAddress{}, rv)
		if err == nil {
			c.log.Info("took this controller's page out of the Service's Endpoints", "endpoints", p.Name, "pod", p.Self.Pod)
		}
	}
	if err != nil {
		c.log.Warn("take this controller's page out of the Service's Endpoints failed; the next leader writes over it", "endpoints", p.Name, "err", err)
	}
}

func addressText(a kube.PageAddress) string {
	return net.JoinHostPort(a.IP, strconv.Itoa(int(a.Port)))
}
