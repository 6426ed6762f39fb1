package collector

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/deployment-service/deployment_service_exporter/client"
)

// PollRecord is one poll as the pages, the text view and the debug view
// show it. It holds only redacted text, and is never changed once kept.
type PollRecord struct {
	ID       uint64
	Start    time.Time
	Duration time.Duration
	// Target is the redacted base URL; Module the module name, empty for
	// the service behind /metrics.
	Target, Module string
	// Up is deployment_service_up: root and both lists answered well.
	Up bool
	// Summary says in one line what failed or was slow, or "ok".
	State   PollState
	Summary string
	// Projects and Locations are the list counts, when the lists were read.
	Projects, Locations Count
	// HeldOff tells that a hold-off, asked with HoldOffStatus, kept requests
	// of the poll unsent; HeldOffUntil is the latest end of one it met.
	HeldOff       bool
	HoldOffStatus int
	HeldOffUntil  time.Time
	// HoldOffPollID, in a copy from the log, names the poll that met it.
	HoldOffPollID uint64
	// Requests are in endpoint order; Dropped counts those not kept.
	Requests []client.TraceRequest
	Dropped  int

	// metUntil is the end of a hold-off an answer in this poll started.
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

// slowAnswer is the wait for an answer's first byte past which the pages
// call it slow: the latency at which DeploymentServiceAPISlow warns.
const slowAnswer = 2 * time.Second

// Slow tells whether r's first byte came after slowAnswer.
func Slow(r client.TraceRequest) bool { return r.Phases.FirstByte > slowAnswer }

// NotSent tells whether r was never sent: the client gives a reason for
// every request that failed once sent.
func NotSent(r client.TraceRequest) bool { return r.Note == "" && r.Reason == "" && r.Error != "" }

// StatusText renders r's status: "not sent", "no response" or the code.
func StatusText(r client.TraceRequest) string {
	switch {
	case NotSent(r):
		return "not sent"
	case r.Status == 0:
		return "no response"
	}
	return strconv.Itoa(r.Status)
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
	rec.sum(s)
	return rec
}

// sum orders rec's requests and says how the poll of s went.
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
	switch slow := slowText(rec.Requests); {
	case slow == "":
	case rec.State == PollOK:
		rec.State, rec.Summary = PollSlow, "slow: "+slow
	default:
		rec.Summary += "; slow: " + slow
	}
}

// detailID is the id a detail view's URL ends with, 0 for other URLs.
func detailID(u string) int64 {
	id, _ := strconv.ParseInt(path.Base(u), 10, 64)
	return id
}

// slowText names each endpoint with a slow answer, and its slowest.
func slowText(reqs []client.TraceRequest) string {
	var parts []string
	for _, ep := range client.Endpoints {
		var worst time.Duration
		for _, r := range reqs {
			if r.Endpoint == ep && Slow(r) {
				worst = max(worst, r.Phases.FirstByte)
			}
		}
		if worst > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", ep, worst.Round(time.Millisecond)))
		}
	}
	return strings.Join(parts, ", ")
}

// holdOffEnd is the latest hold-off end that the requests of a poll set.
func holdOffEnd(reqs []client.TraceRequest) time.Time {
	var end time.Time
	for _, r := range reqs {
		end = maxTime(end, r.HoldOffUntil)
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

// ModuleName names a poll's module: the one behind /metrics has none.
func ModuleName(module string) string {
	if module == "" {
		return "(flags)"
	}
	return module
}

// SentNothing tells whether a hold-off kept the poll from sending anything.
func (rec *PollRecord) SentNothing() bool {
	return rec.HeldOff && len(rec.Requests) == 0
}

// KeyRefused says plainly what a 401 in the poll means, "" without one.
func (rec *PollRecord) KeyRefused() string {
	if slices.ContainsFunc(rec.Requests, func(r client.TraceRequest) bool { return r.Status == 401 && !NotSent(r) }) {
		return "The service refused the exporter's key (401 Unauthorized): it is wrong, revoked, or sent with another scheme than the one WWW-Authenticate names."
	}
	return ""
}

// NotSentText says why r was not sent: a hold-off, with its status and
// end, or what stopped it.
func (rec *PollRecord) NotSentText(r client.TraceRequest) string {
	if r.Status == 0 {
		return r.Error
	}
	return fmt.Sprintf("the service had asked to hold off (status %d) until %s", r.Status, untilText(rec.HeldOffUntil))
}

func untilText(t time.Time) string {
	if t.IsZero() {
		return "an unknown time"
	}
	return t.UTC().Format("2006-01-02 15:04:05") + " UTC"
}

// textView is the debug view of a poll, for curl users. Excerpts are
// quoted, so control characters from the service cannot reach a terminal.
var textView = template.Must(template.New("poll").Funcs(template.FuncMap{
	"rfc3339":     func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"rfc3339nano": func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) },
	"duration":    func(d time.Duration) time.Duration { return d.Round(time.Microsecond) },
	"moduleName":  ModuleName, "phases": PhasesText, "status": StatusText, "notSent": NotSent, "slow": Slow,
}).Parse(`Poll {{with .ID}}{{.}} {{end}}of {{.Target}}, module {{moduleName .Module}}
Started {{rfc3339nano .Start}}, took {{duration .Duration}}, up {{.Up}}: {{.Summary}}
{{if .SentNothing}}Sent nothing: the service asked to hold off (status {{.HoldOffStatus}}) until {{if .HeldOffUntil.IsZero}}an unknown time{{else}}{{rfc3339 .HeldOffUntil}}{{end}}
{{- with .HoldOffPollID}}; poll {{.}} met that answer{{end}}.
{{else if not .HeldOffUntil.IsZero}}The service asked to hold off: no requests until {{rfc3339 .HeldOffUntil}}.
{{end}}{{with .KeyRefused}}{{.}}
{{end}}
{{range .Requests}}{{if .Note}}    {{.Endpoint}} page {{.Page}}: {{if .NoteFailed}}FAILED, pagination: {{end}}{{.Note}}
{{else if notSent .}}{{.Endpoint}} {{.Method}} {{.URL}} -> not sent: {{$.NotSentText .}}
{{else}}{{.Endpoint}} {{.Method}} {{.URL}} -> {{if .Status}}status {{end}}{{status .}}, {{.Bytes}} bytes, {{duration .Duration}}{{if slow .}}, slow{{end}}{{if .Error}}, {{.Reason}}: {{.Error}}{{end}}
{{with phases .Phases}}    Phases: {{.}}
{{end}}{{template "answer" .}}{{end}}{{end}}{{with .Dropped}}({{.}} more requests not kept)
{{end}}
{{- define "answer"}}{{with .ContentType}}    Content-Type: {{.}}
{{end}}{{with .Location}}    Location: {{.}}
{{end}}{{with .WWWAuthenticate}}    WWW-Authenticate: {{.}}
{{end}}{{if or .RetryAfter (not .HoldOffUntil.IsZero)}}    Retry-After: {{or .RetryAfter "(none)"}}{{if not .HoldOffUntil.IsZero}}; held off until {{rfc3339 .HoldOffUntil}}{{end}}
{{end}}{{with .BodyExcerpt}}    Body: {{printf "%q" .}}
{{end}}{{end}}`))

// WriteText writes the debug view of rec as plain text.
func (rec *PollRecord) WriteText(w io.Writer) error { return textView.Execute(w, rec) }

// writeAnswerText writes what the service sent back to r, indented.
func writeAnswerText(w io.Writer, r client.TraceRequest) {
	_ = textView.ExecuteTemplate(w, "answer", r)
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
