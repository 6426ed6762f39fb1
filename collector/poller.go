package collector

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/deployment-service/deployment_service_exporter/client"
)

// errTooLate stands for endpoints whose results did not arrive before the
// scrape had to answer.
var errTooLate = errors.New("poll did not finish before the scrape deadline")

// PollerOptions tunes a Poller.
type PollerOptions struct {
	// Timeout bounds a poll when the caller's context has no deadline.
	Timeout time.Duration
	// MinInterval is the least time between the starts of two polls; a
	// scrape inside it is answered from the last poll. 0 polls every scrape.
	MinInterval time.Duration
	Logger      *slog.Logger
	// Recent, when set, keeps a record of every poll, under Name (the
	// redacted base URL) and Module.
	Recent *PollLog
	Name   string
	Module string
}

// Poller owns time for one target: it shares a poll in flight between
// concurrent scrapes, answers from the last poll inside the minimum
// interval, and sends nothing while the service asked it to hold off.
type Poller struct {
	target *Target
	opts   PollerOptions

	mu       sync.Mutex
	inflight *pollCall
	last     *Snapshot
	// heldUntil is the end of the last hold-off logged, so each is logged once.
	heldUntil time.Time
}

// pollCall is one poll in flight and the scrapes waiting for it.
type pollCall struct {
	run     *pollRun
	done    chan struct{}
	snap    *Snapshot
	waiters int
	cancel  context.CancelFunc
}

// NewPoller returns a Poller for t.
func NewPoller(t *Target, opts PollerOptions) *Poller {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	return &Poller{target: t, opts: opts}
}

// Target returns the target the poller watches.
func (p *Poller) Target() *Target { return p.target }

// Poll returns a snapshot for one scrape, by the time ctx is done at the
// latest. It joins the poll in flight if there is one; a scrape that gives
// up leaves the poll running for the others, and the last one to give up
// cancels it.
func (p *Poller) Poll(ctx context.Context) *Snapshot {
	now := time.Now()
	if until, status := p.target.Client.HoldOff(); now.Before(until) {
		p.opts.Logger.Debug("Holding off the service", "until", until, "status", status)
		s := failedSnapshot(now, p.target, status, client.ErrHeldOff)
		p.record(s)
		return s
	}

	p.mu.Lock()
	if p.last != nil && p.opts.MinInterval > 0 && now.Sub(p.last.Start) < p.opts.MinInterval && p.last.reusableFor(p.budget(ctx)) {
		last := p.last
		p.mu.Unlock()
		return last
	}
	c := p.inflight
	if c == nil {
		c = p.start(ctx)
	}
	c.waiters++
	p.mu.Unlock()

	select {
	case <-c.done:
		return c.snap
	case <-ctx.Done():
		// Answer with what has arrived; the rest is reported too late.
		snap := c.run.snapshot()
		p.leave(c)
		return snap
	}
}

// start begins a poll; p.mu is held. The poll does not inherit the
// scrape's cancellation, only its deadline made a little earlier, so its
// results reach the scrape before the scrape has to answer.
func (p *Poller) start(ctx context.Context) *pollCall {
	budget := p.budget(ctx)
	deadline := time.Now().Add(budget - handoffMargin(budget))
	pctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	// Every poll is traced, so that the debug views can show any of them.
	trace := &client.Trace{}
	pctx = client.WithTrace(pctx, trace)
	c := &pollCall{run: newPollRun(pctx, p.target, trace, budget), done: make(chan struct{}), cancel: cancel}
	p.inflight = c
	go func() {
		defer cancel()
		snap := c.run.run(p.opts.Logger)
		p.record(snap)
		p.logHoldOff()
		p.mu.Lock()
		if p.inflight == c {
			p.inflight = nil
		}
		// A poll cancelled because every scrape left is not worth keeping.
		if !errors.Is(context.Cause(pctx), context.Canceled) {
			p.last = snap
		}
		c.snap = snap
		p.mu.Unlock()
		close(c.done)
	}()
	return c
}

// budget is the time a poll started now for ctx may take.
func (p *Poller) budget(ctx context.Context) time.Duration {
	if deadline, ok := ctx.Deadline(); ok {
		return time.Until(deadline)
	}
	return p.opts.Timeout
}

// logHoldOff logs, once, that the service asked the exporter to hold off.
func (p *Poller) logHoldOff() {
	until, status := p.target.Client.HoldOff()
	p.mu.Lock()
	fresh := until.After(time.Now()) && !until.Equal(p.heldUntil)
	if fresh {
		p.heldUntil = until
	}
	p.mu.Unlock()
	if fresh {
		p.opts.Logger.Warn("The service asked to hold off: no requests until then", "status", status, "until", until.UTC().Format(time.RFC3339))
	}
}

// record keeps s in the recent-polls log, if there is one.
func (p *Poller) record(s *Snapshot) {
	if p.opts.Recent != nil {
		p.opts.Recent.Add(newPollRecord(p.opts.Name, p.opts.Module, s))
	}
}

// leave drops one waiter from c and cancels the poll once nobody waits.
func (p *Poller) leave(c *pollCall) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c.waiters--
	if c.waiters == 0 {
		c.cancel()
		// A scrape arriving now must start a poll of its own rather than
		// join one that is being cancelled.
		if p.inflight == c {
			p.inflight = nil
		}
	}
}

// handoffMargin is how much earlier than the scrape's deadline a poll
// ends: enough to assemble the snapshot and hand it over.
func handoffMargin(budget time.Duration) time.Duration {
	return min(max(budget/20, 5*time.Millisecond), 50*time.Millisecond)
}
