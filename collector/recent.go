package collector

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
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
	// Up is deployment_service_up: root and both lists answered well.
	Up bool
	// State is how the poll went as a whole, and Summary says in one line
	// what failed, or "ok".
	State   PollState
	Summary string
	// Projects and Locations are the list counts, when the lists were read.
	Projects, Locations Count
	// HeldOff tells whether the poll left requests unsent because the
	// service had asked to hold off (a 429 or 503 with Retry-After), and
	// HoldOffStatus is the status of that answer. HeldOffUntil is the end
	// of the hold-off in force as the poll ended, or that an answer in
	// this poll started; zero when none was.
	HeldOff       bool
	HoldOffStatus int
	HeldOffUntil  time.Time
	// HoldOffPollID is, in a record returned by PollLog.Get, the poll
	// whose answer started the hold-off that kept this one from sending,
	// while that poll is still kept; 0 when unknown.
	HoldOffPollID uint64
	// Requests are the requests and pagination steps of the poll; Dropped
	// counts those left out past the trace's bound.
	Requests []client.TraceRequest
	Dropped  int
}

// PollState is how a poll went as a whole.
type PollState int

// The states of a poll, from best to worst.
const (
	// PollOK means every request answered well.
	PollOK PollState = iota
	// PollPartial means root and both lists answered well, so
	// deployment_service_up is 1, but some detail views did not.
	PollPartial
	// PollFailed means root or a list did not answer well.
	PollFailed
)

// String returns "ok", "partial" or "failed"; the pages use it as a CSS
// class too.
func (s PollState) String() string {
	switch s {
	case PollOK:
		return "ok"
	case PollPartial:
		return "partial"
	}
	return "failed"
}

// PollLog is a bounded ring of the most recent polls, shared by every
// poller of the process.
type PollLog struct {
	mu   sync.Mutex
	ring []*PollRecord
	next int
	seq  uint64
	// targets holds the state of each target polled lately, at most
	// maxTargets of them.
	targets    map[targetKey]*TargetState
	maxTargets int
}

// NewPollLog returns a log that keeps the last size polls, and the state
// of every target polled lately.
func NewPollLog(size int) *PollLog {
	return &PollLog{
		ring:    make([]*PollRecord, 0, max(size, 1)),
		targets: make(map[targetKey]*TargetState), maxTargets: maxTargets,
	}
}

// Add stores rec, giving it the next id, and drops the oldest record once
// the ring is full. It also brings the state of rec's target up to date.
func (l *PollLog) Add(rec *PollRecord) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	rec.ID = l.seq
	l.updateTarget(rec)
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

// Get returns the poll with the given id, if it is still kept. For a poll
// held off, the copy returned names the poll that met the answer which
// started the hold-off, when that one is still kept.
func (l *PollLog) Get(id uint64) (*PollRecord, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.ring {
		if r.ID == id {
			c := *r
			c.HoldOffPollID = l.holdOffPoll(r)
			return &c, true
		}
	}
	return nil, false
}

// HoldOffPoll finds, for a record made outside the log (the debug view of
// /probe), the kept poll whose answer started the hold-off it met; 0 when
// there is none.
func (l *PollLog) HoldOffPoll(rec *PollRecord) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.holdOffPoll(rec)
}

// holdOffPoll finds the poll whose answer started the hold-off in force
// during rec: the first kept poll of the same target and module with a
// request whose hold-off ends when rec's does. It is looked up when a page
// is asked for, not when rec is added, since a poll can be held off
// before the poll that met the 429 has been recorded. l.mu is held.
func (l *PollLog) holdOffPoll(rec *PollRecord) uint64 {
	if !rec.HeldOff || rec.HeldOffUntil.IsZero() {
		return 0
	}
	var found uint64
	for _, r := range l.ring {
		if r.Target != rec.Target || r.Module != rec.Module || (found != 0 && r.ID > found) {
			continue
		}
		for _, q := range r.Requests {
			if q.HoldOffUntil.Equal(rec.HeldOffUntil) {
				found = r.ID
				break
			}
		}
	}
	return found
}

// newPollRecord sums up a snapshot.
func newPollRecord(target, module string, s *Snapshot) *PollRecord {
	rec := &PollRecord{
		Start: s.Start, Duration: s.Duration, Target: target, Module: module, Up: s.up(),
		Projects: s.Projects, Locations: s.Locations,
	}
	if s.trace != nil {
		rec.Requests, rec.Dropped = s.trace.Requests()
	}
	for _, st := range s.Endpoints {
		if errors.Is(st.Err, client.ErrHeldOff) {
			rec.HeldOff, rec.HoldOffStatus = true, st.Status
		}
	}
	// A poll that sent nothing knows the end from the snapshot; one that
	// met the 429 from its requests too.
	rec.HeldOffUntil = maxTime(holdOffEnd(rec.Requests), s.HoldOffUntil)
	rec.State, rec.Summary = summarize(s)
	return rec
}

// holdOffEnd is the latest hold-off end that the requests of a poll set.
func holdOffEnd(reqs []client.TraceRequest) time.Time {
	var end time.Time
	for _, r := range reqs {
		if r.HoldOffUntil.After(end) {
			end = r.HoldOffUntil
		}
	}
	return end
}

// failure is one thing that went wrong in a poll: which endpoint, how and
// with which status (0 when no response came).
type failure struct {
	what   string
	status int
}

func (f failure) String() string {
	if f.status == 0 {
		return f.what
	}
	return fmt.Sprintf("%s %d", f.what, f.status)
}

// summarize tells how a poll went, in one line that names every failure
// with its status, the highest status first. The detail views are counted
// one by one rather than taken from the location_detail endpoint, whose
// status need not be a failing one.
func summarize(s *Snapshot) (PollState, string) {
	var order []failure
	groups := map[failure][]string{}
	add := func(name string, f failure) {
		if _, ok := groups[f]; !ok {
			order = append(order, f)
		}
		groups[f] = append(groups[f], name)
	}
	for _, ep := range []client.Endpoint{client.EndpointRoot, client.EndpointProjects, client.EndpointLocations} {
		if st, ok := s.Endpoints[ep]; ok && !st.ok() {
			add(string(ep), failure{failureKind(st.Err), st.Status})
		}
	}
	detailFailures := detailFailures(s)
	checked := len(s.checkedDetails())
	for _, f := range detailFailures.order {
		name := string(client.EndpointLocationDetail)
		if n := detailFailures.count[f]; n < checked {
			name = fmt.Sprintf("%s (%d of %d)", name, n, checked)
		}
		add(name, f)
	}
	if len(order) == 0 {
		return PollOK, "ok"
	}
	slices.SortStableFunc(order, func(a, b failure) int { return cmp.Compare(b.status, a.status) })
	parts := make([]string, 0, len(order))
	for _, f := range order {
		parts = append(parts, strings.Join(groups[f], ", ")+" "+f.String())
	}
	state := PollFailed
	if s.up() {
		state = PollPartial
	}
	return state, state.String() + ": " + strings.Join(parts, ", ")
}

type detailTally struct {
	order []failure
	count map[failure]int
}

// detailFailures groups the detail views this poll checked and found
// failing by kind and status. When none failed but the location_detail
// endpoint did, that failure stands for them.
func detailFailures(s *Snapshot) detailTally {
	t := detailTally{count: map[failure]int{}}
	checked := s.checkedDetails()
	for _, d := range checked {
		if d.Err == nil {
			continue
		}
		f := failure{failureKind(d.Err), d.Status}
		if t.count[f] == 0 {
			t.order = append(t.order, f)
		}
		t.count[f]++
	}
	if st, ok := s.Endpoints[client.EndpointLocationDetail]; ok && !st.ok() && len(t.order) == 0 {
		f := failure{failureKind(st.Err), st.Status}
		t.order, t.count[f] = []failure{f}, len(checked)
	}
	return t
}

// failureKind names how err failed: its reason, or what kept the request
// from being sent or waited for.
func failureKind(err error) string {
	switch {
	case errors.Is(err, client.ErrHeldOff):
		return "held off"
	case errors.Is(err, errTooLate):
		return "too late"
	case errors.Is(err, client.ErrKeyUnavailable):
		return "key unavailable"
	}
	return string(client.ReasonOf(err))
}

// ModuleName is how the pages and the text view name a poll's module:
// the poll of the single target behind /metrics has none, and is set by
// the flags.
func ModuleName(module string) string {
	if module == "" {
		return "(flags)"
	}
	return module
}

// WriteText writes the debug view of rec as plain text, for curl users.
func (rec *PollRecord) WriteText(w io.Writer) error {
	module := ModuleName(rec.Module)
	var b strings.Builder
	if rec.ID == 0 {
		// A poll made for this view only, kept nowhere.
		fmt.Fprintf(&b, "Poll of %s, module %s\n", rec.Target, module)
	} else {
		fmt.Fprintf(&b, "Poll %d of %s, module %s\n", rec.ID, rec.Target, module)
	}
	fmt.Fprintf(&b, "Started %s, took %s, up %v: %s\n", rec.Start.UTC().Format(time.RFC3339Nano), rec.Duration.Round(time.Microsecond), rec.Up, rec.Summary)
	rec.writeHoldOffText(&b)
	b.WriteByte('\n')
	for _, r := range rec.Requests {
		if r.Note != "" {
			failed := ""
			if r.NoteFailed {
				failed = "FAILED, pagination: "
			}
			fmt.Fprintf(&b, "    %s page %d: %s%s\n", r.Endpoint, r.Page, failed, r.Note)
			continue
		}
		fmt.Fprintf(&b, "%s %s %s -> status %d, %d bytes, %s", r.Endpoint, r.Method, r.URL, r.Status, r.Bytes, r.Duration.Round(time.Microsecond))
		if r.Error != "" {
			fmt.Fprintf(&b, ", %s: %s", r.Reason, r.Error)
		}
		b.WriteByte('\n')
		if p := PhasesText(r.Phases); p != "" {
			fmt.Fprintf(&b, "    Phases: %s\n", p)
		}
		writeAnswerText(&b, r)
	}
	if rec.Dropped > 0 {
		fmt.Fprintf(&b, "(%d more requests not kept)\n", rec.Dropped)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeAnswerText adds what the service sent back, as far as the trace
// kept it, on indented lines below the request. The excerpt is quoted, so
// control characters from the service cannot reach a terminal.
func writeAnswerText(b *strings.Builder, r client.TraceRequest) {
	if r.ContentType != "" {
		fmt.Fprintf(b, "    Content-Type: %s\n", r.ContentType)
	}
	if r.Location != "" {
		fmt.Fprintf(b, "    Location: %s\n", r.Location)
	}
	if r.WWWAuthenticate != "" {
		fmt.Fprintf(b, "    WWW-Authenticate: %s\n", r.WWWAuthenticate)
	}
	if r.RetryAfter != "" || !r.HoldOffUntil.IsZero() {
		fmt.Fprintf(b, "    Retry-After: %s", cmp.Or(r.RetryAfter, "(none)"))
		if !r.HoldOffUntil.IsZero() {
			fmt.Fprintf(b, "; held off until %s", r.HoldOffUntil.UTC().Format(time.RFC3339))
		}
		b.WriteByte('\n')
	}
	if r.BodyExcerpt != "" {
		fmt.Fprintf(b, "    Body: %q\n", r.BodyExcerpt)
	}
}

// PhasesText renders when each phase of an exchange ended, counted from
// the request's start, as blackbox_exporter's debug output does; "" when
// none was timed.
func PhasesText(p client.Phases) string {
	var parts []string
	if p.Reused {
		parts = append(parts, "connection reused")
	}
	for _, ph := range []struct {
		name string
		d    time.Duration
	}{{"DNS", p.DNS}, {"connect", p.Connect}, {"TLS", p.TLS}, {"first byte", p.FirstByte}} {
		if ph.d > 0 {
			parts = append(parts, ph.name+" "+ph.d.Round(time.Microsecond).String())
		}
	}
	return strings.Join(parts, ", ")
}

// SentNothing tells whether the poll sent no request because the service
// had asked to hold off.
func (rec *PollRecord) SentNothing() bool {
	return rec.HeldOff && len(rec.Requests) == 0
}

// writeHoldOffText says until when the service asked to hold off and, for
// a poll that sent nothing, which poll met that answer.
func (rec *PollRecord) writeHoldOffText(b *strings.Builder) {
	until := "an unknown time"
	if !rec.HeldOffUntil.IsZero() {
		until = rec.HeldOffUntil.UTC().Format(time.RFC3339)
	}
	switch {
	case rec.SentNothing():
		fmt.Fprintf(b, "Sent nothing: the service asked to hold off (status %d) until %s", rec.HoldOffStatus, until)
		if rec.HoldOffPollID != 0 {
			fmt.Fprintf(b, "; poll %d met that answer", rec.HoldOffPollID)
		}
		b.WriteString(".\n")
	case !rec.HeldOffUntil.IsZero():
		fmt.Fprintf(b, "The service asked to hold off: no requests until %s.\n", until)
	}
}
