package collector

import (
	"cmp"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/template"
	"time"
	"unsafe"

	"github.com/deployment-service/deployment_service_exporter/client"
)

// PollRecord is one poll as the pages show it, redacted and never changed once kept.
type PollRecord struct {
	ID       uint64
	Start    time.Time
	Duration time.Duration
	// Target is the redacted base URL; Module is empty for /metrics.
	Target, Module      string
	Up                  bool
	State               PollState
	Summary             string
	Projects, Locations Count
	// HeldOffUntil is the latest end of a hold-off that kept requests unsent.
	HeldOff       bool
	HoldOffStatus int
	HeldOffUntil  time.Time
	HoldOffPollID uint64
	// Dropped counts the requests not kept.
	Requests []client.TraceRequest
	Dropped  int

	metUntil time.Time
	size     int
}

// PollState is how a poll went as a whole.
type PollState int

// The states of a poll, from best to worst.
const (
	PollOK      PollState = iota // every request answered well and soon
	PollSlow                     // every request answered well, some slowly
	PollPartial                  // deployment_service_up is 1, but some details failed
	PollFailed                   // root or a list did not answer well
)

// String names s; the pages use it as a CSS class too.
func (s PollState) String() string {
	return [...]string{"ok", "slow", "partial", "failed"}[s]
}

// isSlow tells whether r's first byte came after 2 s, the wait DeploymentServiceAPISlow calls slow.
func isSlow(r client.TraceRequest) bool { return r.Phases.FirstByte > 2*time.Second }

// notSent tells whether r was never sent: the client gives a reason for every failed sent one.
func notSent(r client.TraceRequest) bool { return r.Note == "" && r.Reason == "" && r.Error != "" }

// newPollRecord sums up a snapshot.
func newPollRecord(target, module string, s *Snapshot) *PollRecord {
	rec := &PollRecord{
		Start: s.Start, Duration: s.Duration, Target: target, Module: module, Up: s.up(),
		Projects: s.Projects, Locations: s.Locations,
	}
	if s.trace != nil {
		rec.Requests, rec.Dropped = s.trace.Requests()
	}
	rec.sum(s)
	return rec
}

func (rec *PollRecord) sum(s *Snapshot) {
	slices.SortStableFunc(rec.Requests, func(a, b client.TraceRequest) int {
		return cmp.Or(cmp.Compare(slices.Index(client.Endpoints, a.Endpoint), slices.Index(client.Endpoints, b.Endpoint)),
			cmp.Compare(a.Page, b.Page), cmp.Compare(detailID(a.URL), detailID(b.URL)))
	})
	for _, st := range s.Endpoints {
		if errors.Is(st.Err, client.ErrHeldOff) {
			rec.HeldOff, rec.HoldOffStatus = true, st.Status
		}
	}
	rec.HeldOffUntil = maxTime(holdOffEnd(rec.Requests), s.HoldOffUntil)
	rec.State, rec.Summary = summarize(s)
	var slow []string
	for _, ep := range client.Endpoints {
		var worst time.Duration
		for _, r := range rec.Requests {
			if r.Endpoint == ep && isSlow(r) {
				worst = max(worst, r.Phases.FirstByte)
			}
		}
		if worst > 0 {
			slow = append(slow, fmt.Sprintf("%s %s", ep, worst.Round(time.Millisecond)))
		}
	}
	if slow != nil && rec.State == PollOK {
		rec.State, rec.Summary = PollSlow, "slow: "+strings.Join(slow, ", ")
	} else if slow != nil {
		rec.Summary += "; slow: " + strings.Join(slow, ", ")
	}
}

func detailID(u string) int64 {
	id, _ := strconv.ParseInt(path.Base(u), 10, 64)
	return id
}

func holdOffEnd(reqs []client.TraceRequest) time.Time {
	var end time.Time
	for _, r := range reqs {
		end = maxTime(end, r.HoldOffUntil)
	}
	return end
}

// failure is how an endpoint (n of the detail views) failed in a poll: kind adds the status, if any, to what.
type failure struct {
	what, kind string
	status, n  int
}

// failureOf names how err failed: its reason, or what kept it from being sent or waited for.
func failureOf(err error, status int) failure {
	f := failure{what: string(client.ReasonOf(err)), status: status, n: 1}
	switch {
	case errors.Is(err, client.ErrHeldOff):
		f.what = "held off"
	case errors.Is(err, errTooLate):
		f.what = "too late"
	case errors.Is(err, client.ErrKeyUnavailable):
		f.what = "key unavailable"
	}
	f.kind = f.what
	if status != 0 {
		f.kind = fmt.Sprintf("%s %d", f.what, status)
	}
	return f
}

// detailFailures groups the failing detail views of s by kind and status, else takes location_detail's failure.
func detailFailures(s *Snapshot) []failure {
	var out []failure
	checked := s.checkedDetails()
	for _, d := range checked {
		if d.Err == nil {
			continue
		}
		f := failureOf(d.Err, d.Status)
		if i := slices.IndexFunc(out, func(o failure) bool { return o.kind == f.kind }); i >= 0 {
			out[i].n++
		} else {
			out = append(out, f)
		}
	}
	if st, ok := s.Endpoints[client.EndpointLocationDetail]; ok && !st.ok() && len(out) == 0 {
		out = append(out, failureOf(st.Err, st.Status))
		out[0].n = len(checked)
	}
	return out
}

// summarize tells how a poll went in one line naming every failure, highest status first.
func summarize(s *Snapshot) (PollState, string) {
	var order []failure
	names := map[string][]string{}
	add := func(name string, f failure) {
		if names[f.kind] == nil {
			order = append(order, f)
		}
		names[f.kind] = append(names[f.kind], name)
	}
	for _, ep := range upEndpoints {
		if st, ok := s.Endpoints[ep]; ok && !st.ok() {
			add(string(ep), failureOf(st.Err, st.Status))
		}
	}
	checked := len(s.checkedDetails())
	for _, f := range detailFailures(s) {
		name := string(client.EndpointLocationDetail)
		if f.n < checked {
			name = fmt.Sprintf("%s (%d of %d)", name, f.n, checked)
		}
		add(name, f)
	}
	if len(order) == 0 {
		return PollOK, "ok"
	}
	slices.SortStableFunc(order, func(a, b failure) int { return cmp.Compare(b.status, a.status) })
	parts := make([]string, 0, len(order))
	for _, f := range order {
		parts = append(parts, strings.Join(names[f.kind], ", ")+" "+f.kind)
	}
	state := PollFailed
	if s.up() {
		state = PollPartial
	}
	return state, state.String() + ": " + strings.Join(parts, ", ")
}

// ModuleName names a poll's module on the pages: "(flags)" for /metrics.
func ModuleName(module string) string { return cmp.Or(module, "(flags)") }

// KeyRefused says plainly what a 401 in the poll means, "" without one.
func (rec *PollRecord) KeyRefused() string {
	if slices.ContainsFunc(rec.Requests, func(r client.TraceRequest) bool { return r.Status == 401 && !notSent(r) }) {
		return "The service refused the exporter's key (401 Unauthorized): it is wrong, revoked, or sent with another scheme than the one WWW-Authenticate names."
	}
	return ""
}

// HoldOffText says that the service had asked, with status, to hold off and until when.
func (rec *PollRecord) HoldOffText(status int) string {
	until := "an unknown time"
	if !rec.HeldOffUntil.IsZero() {
		until = rec.HeldOffUntil.UTC().Format("2006-01-02 15:04:05") + " UTC"
	}
	return fmt.Sprintf("the service had asked to hold off (status %d) until %s", status, until)
}

//go:embed poll.tmpl
var textSource string

// PollFuncs are the functions of the templates that show a poll, as text or as HTML.
var PollFuncs = map[string]any{
	"rfc3339":     func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"rfc3339nano": func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) },
	"duration":    func(d time.Duration) time.Duration { return d.Round(time.Microsecond) },
	"moduleName":  ModuleName, "phases": phasesText, "notSent": notSent, "slow": isSlow,
}

var textView = template.Must(template.New("").Funcs(PollFuncs).Parse(textSource))

// WriteText writes the debug view of rec as plain text.
func (rec *PollRecord) WriteText(w io.Writer) error { return textView.ExecuteTemplate(w, "poll", rec) }

// phasesText renders when each phase of an exchange ended, from the request's start; "" when none was timed.
func phasesText(p client.Phases) string {
	var parts []string
	if p.Reused {
		parts = append(parts, "connection reused")
	}
	for i, d := range []time.Duration{p.DNS, p.Connect, p.TLS, p.FirstByte} {
		if d > 0 {
			parts = append(parts, [...]string{"DNS", "connect", "TLS", "first byte"}[i]+" "+d.Round(time.Microsecond).String())
		}
	}
	return strings.Join(parts, ", ")
}

const (
	// maxTargets bounds the targets kept: the /probe cache's, plus /metrics.
	maxTargets = maxProbeTargets + 1
	// maxKeptBytes bounds the polls kept of all targets, as PollRecord.bytes counts them.
	maxKeptBytes = 32 << 20
	// DefaultRecentPolls is how many targets' latest polls the landing page lists.
	DefaultRecentPolls = 20
)

// PollLog keeps what the pages show of each target polled lately.
type PollLog struct {
	mu      sync.Mutex
	seq     uint64
	targets map[targetKey]TargetState
	bytes   int
	recent  int
}

// TargetState is a target's latest poll and, until one is ok, its first failing one and the one that met its hold-off.
type TargetState struct {
	Latest, Failing, HoldOff *PollRecord
}

// targetKey names a target and module: by URL for /probe, by redacted URL for the poll log.
type targetKey struct{ target, module string }

// NewPollLog returns a log whose Recent lists as many as recent polls.
func NewPollLog(recent int) *PollLog {
	return &PollLog{targets: make(map[targetKey]TargetState), recent: recent}
}

// Add keeps rec, with the next id, as its target's latest poll; the targets polled longest ago go past the bounds.
func (l *PollLog) Add(rec *PollRecord) {
	rec.metUntil, rec.size = holdOffEnd(rec.Requests), rec.bytes()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	rec.ID = l.seq
	key := targetKey{rec.Target, rec.Module}
	st := l.targets[key]
	l.bytes -= st.bytes()
	st.Latest = rec
	if rec.State <= PollSlow {
		st.Failing, st.HoldOff = nil, nil
	} else if st.Failing == nil {
		st.Failing = rec
	}
	switch {
	case !rec.metUntil.IsZero() && (st.HoldOff == nil || rec.metUntil.After(st.HoldOff.metUntil)):
		st.HoldOff = rec
	case st.HoldOff == nil:
		st.HoldOff = l.heldOffBy(rec)
	}
	l.targets[key] = st
	l.bytes += st.bytes()
	for len(l.targets) > 1 && (len(l.targets) > maxTargets || l.bytes > maxKeptBytes) {
		oldest := slices.MinFunc(slices.Collect(maps.Keys(l.targets)), func(a, b targetKey) int {
			return cmp.Compare(l.targets[a].Latest.ID, l.targets[b].Latest.ID)
		})
		l.bytes -= l.targets[oldest].bytes()
		delete(l.targets, oldest)
	}
}

// bytes counts each of st's polls once.
func (st TargetState) bytes() (n int) {
	var seen []*PollRecord
	for _, r := range []*PollRecord{st.Latest, st.Failing, st.HoldOff} {
		if r != nil && !slices.Contains(seen, r) {
			seen, n = append(seen, r), n+r.size
		}
	}
	return n
}

// bytes is about how much memory rec keeps, shared excerpts counted each time.
func (rec *PollRecord) bytes() int {
	n := int(unsafe.Sizeof(*rec)) + len(rec.Target) + len(rec.Module) + len(rec.Summary) + len(rec.Requests)*int(unsafe.Sizeof(client.TraceRequest{}))
	for _, q := range rec.Requests {
		n += len(q.URL) + len(q.Error) + len(q.Note) + len(q.BodyExcerpt) + len(q.ContentType) + len(q.Location) + len(q.WWWAuthenticate) + len(q.RetryAfter)
	}
	return n
}

// heldOffBy finds the kept poll, of another target of rec's origin, whose answer started rec's hold-off.
func (l *PollLog) heldOffBy(rec *PollRecord) *PollRecord {
	if !rec.HeldOff || rec.metUntil.Equal(rec.HeldOffUntil) {
		return nil
	}
	for _, st := range l.targets {
		if st.HoldOff != nil && st.HoldOff.metUntil.Equal(rec.HeldOffUntil) {
			return st.HoldOff
		}
	}
	return nil
}

// view copies rec for the pages, with the id of the poll that met its hold-off, kept maybe after rec.
func (l *PollLog) view(rec *PollRecord) *PollRecord {
	if rec == nil {
		return nil
	}
	c := *rec
	if m := l.heldOffBy(rec); m != nil {
		c.HoldOffPollID = m.ID
	}
	return &c
}

func (l *PollLog) viewState(st TargetState) TargetState {
	return TargetState{l.view(st.Latest), l.view(st.Failing), l.view(st.HoldOff)}
}

// holdOffPoll returns a copy of the kept poll that met rec's hold-off, nil if none.
func (l *PollLog) holdOffPoll(rec *PollRecord) *PollRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.view(l.heldOffBy(rec))
}

// Get returns a copy of the poll with the given id, if it is still kept.
func (l *PollLog) Get(id uint64) (*PollRecord, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, st := range l.targets {
		for _, r := range []*PollRecord{st.Latest, st.Failing, st.HoldOff} {
			if r != nil && r.ID == id {
				return l.view(r), true
			}
		}
	}
	return nil, false
}

// Target returns what is kept of a target, by redacted URL and module.
func (l *PollLog) Target(target, module string) (TargetState, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st, ok := l.targets[targetKey{target, module}]
	return l.viewState(st), ok
}

// Targets returns every target polled lately: the one behind /metrics first, then the others by URL and module.
func (l *PollLog) Targets() []TargetState {
	l.mu.Lock()
	out := make([]TargetState, 0, len(l.targets))
	for _, st := range l.targets {
		out = append(out, l.viewState(st))
	}
	l.mu.Unlock()
	slices.SortFunc(out, func(a, b TargetState) int {
		return cmp.Or(cmp.Compare(min(len(a.Latest.Module), 1), min(len(b.Latest.Module), 1)),
			cmp.Compare(a.Latest.Target, b.Latest.Target), cmp.Compare(a.Latest.Module, b.Latest.Module))
	})
	return out
}

// Recent returns the latest poll of the targets polled last, newest first.
func (l *PollLog) Recent() []*PollRecord {
	targets := l.Targets()
	slices.SortFunc(targets, func(a, b TargetState) int { return cmp.Compare(b.Latest.ID, a.Latest.ID) })
	out := make([]*PollRecord, 0, l.recent)
	for _, st := range targets[:min(len(targets), l.recent)] {
		out = append(out, st.Latest)
	}
	return out
}

// TargetPage is a target's page under external, "" without one; /metrics has no module.
func TargetPage(external *url.URL, target, module string) string {
	if external == nil {
		return ""
	}
	q := url.Values{"target": {target}}
	if module != "" {
		q.Set("module", module)
	}
	u := external.JoinPath("target")
	u.RawQuery = q.Encode()
	return u.String()
}

// failureLog logs a failure at warn when it starts or changes kind, at debug while it lasts and at info when it ends.
type failureLog struct {
	mu      sync.Mutex
	failing map[client.Endpoint]*failingRun
}

// failingRun is a run of polls in which an endpoint failed, kind ("http_status 401") naming how.
type failingRun struct {
	kind, since string // since is when the run began, in RFC 3339
	polls       int
}

// log writes the lines a complete poll calls for.
func (f *failureLog) log(logger *slog.Logger, s *Snapshot) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failing == nil {
		f.failing = make(map[client.Endpoint]*failingRun)
	}
	for _, ep := range upEndpoints {
		st, ok := s.Endpoints[ep]
		switch {
		case !ok:
		case errors.Is(st.Err, client.ErrHeldOff):
			logger.Debug("Endpoint not polled: holding off", "endpoint", ep, "status", st.Status)
		case st.ok():
			f.step(logger.With("endpoint", ep), "Endpoint", s.Start, ep, "")
		default:
			f.step(logger.With("endpoint", ep), "Endpoint", s.Start, ep, failureOf(st.Err, st.Status).kind,
				"reason", client.ReasonOf(st.Err), "status", st.Status, "err", st.Err)
		}
	}
	f.logDetails(logger, s)
}

// logDetails follows the detail views as one, with one line that sums them up.
func (f *failureLog) logDetails(logger *slog.Logger, s *Snapshot) {
	checked := s.checkedDetails()
	var ids []string
	for _, d := range checked {
		if d.Err != nil {
			logger.Debug("Location detail failed", "location_id", d.ID, "status", d.Status, "err", d.Err)
			ids = append(ids, strconv.FormatInt(d.ID, 10))
		}
	}
	st, ok := s.Endpoints[client.EndpointLocationDetail]
	if !ok {
		return // a run of failures stays open until a detail view is asked for
	}
	kinds := detailFailures(s)
	slices.SortFunc(kinds, func(a, b failure) int { return cmp.Or(cmp.Compare(b.status, a.status), cmp.Compare(a.what, b.what)) })
	var names []string
	failed := 0
	for _, k := range kinds {
		if k.what != "held off" {
			names, failed = append(names, k.kind), failed+k.n
		}
	}
	if len(kinds) > 0 && len(names) == 0 {
		logger.Debug("Location details not polled: holding off", "status", st.Status)
		return
	}
	idList := strings.Join(ids[:min(len(ids), 5)], ",")
	if len(ids) > 5 {
		idList += fmt.Sprintf(" and %d more", len(ids)-5)
	}
	kind := strings.Join(names, ", ")
	f.step(logger, "Location details", s.Start, client.EndpointLocationDetail, kind,
		"failed", failed, "total", len(checked), "location_ids", idList, "kinds", kind, "status", st.Status, "err", st.Err)
}

// step moves ep's run of failures on by one poll, kind "" when it answered well, and logs it.
func (f *failureLog) step(logger *slog.Logger, what string, start time.Time, ep client.Endpoint, kind string, attrs ...any) {
	run := f.failing[ep]
	switch {
	case kind == "" && run == nil:
	case kind == "":
		delete(f.failing, ep)
		logger.Info(what+" recovered", "failing_since", run.since, "failed_polls", run.polls)
	case run == nil:
		f.failing[ep] = &failingRun{kind: kind, since: start.UTC().Format(time.RFC3339), polls: 1}
		logger.Warn(what+" failed", attrs...)
	case run.kind != kind:
		logger.Warn(what+" failed", append(attrs, "previously", run.kind, "failing_since", run.since)...)
		run.kind, run.polls = kind, run.polls+1
	default:
		run.polls++
		logger.Debug(what+" still failing", append(attrs, "failing_since", run.since, "failed_polls", run.polls)...)
	}
}
