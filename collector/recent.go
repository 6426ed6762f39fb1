package collector

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/deployment-service/deployment_service_exporter/client"
)

// DefaultRecentPolls is how many polls the recent-polls page keeps.
const DefaultRecentPolls = 100

// PollRecord describes one poll for the recent-polls page and the debug
// views. It holds only redacted text.
type PollRecord struct {
	ID       uint64
	Start    time.Time
	Duration time.Duration
	// Target is the redacted base URL; Module the module name, empty for
	// the service behind /metrics.
	Target string
	Module string
	Up     bool
	// Summary says in one line what failed, or "ok".
	Summary string
	// Requests are the requests and pagination steps of the poll; Dropped
	// counts those left out past the trace's bound.
	Requests []client.TraceRequest
	Dropped  int
}

// PollLog is a bounded ring of the most recent polls, shared by every
// poller of the process.
type PollLog struct {
	mu   sync.Mutex
	ring []*PollRecord
	next int
	seq  uint64
}

// NewPollLog returns a log that keeps the last size polls.
func NewPollLog(size int) *PollLog {
	return &PollLog{ring: make([]*PollRecord, 0, max(size, 1))}
}

// Add stores rec, giving it the next id, and drops the oldest record once
// the ring is full.
func (l *PollLog) Add(rec *PollRecord) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	rec.ID = l.seq
	if len(l.ring) < cap(l.ring) {
		l.ring = append(l.ring, rec)
		return
	}
	l.ring[l.next] = rec
	l.next = (l.next + 1) % len(l.ring)
}

// Recent returns the kept polls, newest first.
func (l *PollLog) Recent() []*PollRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]*PollRecord, 0, len(l.ring))
	for i := range l.ring {
		idx := (l.next - 1 - i + 2*len(l.ring)) % len(l.ring)
		out = append(out, l.ring[idx])
	}
	return out
}

// Get returns the poll with the given id, if it is still kept.
func (l *PollLog) Get(id uint64) (*PollRecord, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.ring {
		if r.ID == id {
			return r, true
		}
	}
	return nil, false
}

// newPollRecord sums up a snapshot.
func newPollRecord(target, module string, s *Snapshot) *PollRecord {
	rec := &PollRecord{Start: s.Start, Duration: s.Duration, Target: target, Module: module, Up: s.Up()}
	if s.trace != nil {
		rec.Requests, rec.Dropped = s.trace.Requests()
	}
	var failed []string
	for _, ep := range client.Endpoints {
		st, ok := s.Endpoints[ep]
		if !ok || st.OK() {
			continue
		}
		what := string(client.ReasonOf(st.Err))
		switch {
		case errors.Is(st.Err, client.ErrHeldOff):
			what = "held off"
		case errors.Is(st.Err, errTooLate):
			what = "too late"
		}
		failed = append(failed, fmt.Sprintf("%s %s %d", ep, what, st.Status))
	}
	rec.Summary = "ok"
	if len(failed) > 0 {
		rec.Summary = "failed: " + strings.Join(failed, ", ")
	}
	return rec
}

// WriteText writes the debug view of rec as plain text, for curl users.
func (rec *PollRecord) WriteText(w io.Writer) error {
	module := rec.Module
	if module == "" {
		module = "(command-line flags)"
	}
	var b strings.Builder
	if rec.ID == 0 {
		// A poll made for this view only, kept nowhere.
		fmt.Fprintf(&b, "Poll of %s, module %s\n", rec.Target, module)
	} else {
		fmt.Fprintf(&b, "Poll %d of %s, module %s\n", rec.ID, rec.Target, module)
	}
	fmt.Fprintf(&b, "Started %s, took %s, up %v: %s\n\n", rec.Start.UTC().Format(time.RFC3339Nano), rec.Duration.Round(time.Microsecond), rec.Up, rec.Summary)
	for _, r := range rec.Requests {
		if r.Note != "" {
			fmt.Fprintf(&b, "    %s page %d: %s\n", r.Endpoint, r.Page, r.Note)
			continue
		}
		fmt.Fprintf(&b, "%s %s %s -> status %d, %d bytes, %s", r.Endpoint, r.Method, r.URL, r.Status, r.Bytes, r.Duration.Round(time.Microsecond))
		if r.Error != "" {
			fmt.Fprintf(&b, ", %s: %s", r.Reason, r.Error)
		}
		b.WriteByte('\n')
	}
	if rec.Dropped > 0 {
		fmt.Fprintf(&b, "(%d more requests not kept)\n", rec.Dropped)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
