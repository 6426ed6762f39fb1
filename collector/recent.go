package collector

import (
	"cmp"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"maps"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/deployment-service/deployment_service_exporter/client"
)

// PollRecord is one poll as every view shows it: redacted, rendered once, never changed once kept.
type PollRecord struct {
	ID                  uint64
	Start               time.Time
	Duration            time.Duration
	Target, Module      string // the redacted base URL; no module for /metrics
	State, Summary      string // State is ok, slow, partial or failed
	Projects, Locations Count
	HeldOffUntil        time.Time // the end of a hold-off this poll met or obeyed
	HoldOffPoll         uint64    // the poll that met the hold-off which kept this one from sending anything
	Notes               []string
	Rows                []Row // the requests, failing first

	metUntil   time.Time // the end of a hold-off that an answer of this poll started
	retryAfter string    // that answer's Retry-After
	heldStatus int       // the status of the hold-off met or obeyed
	size       int
}

// Row is one request of a poll, or one pagination step, as text; State is failed, slow, notsent or ok.
type Row struct{ State, Text string }

var worstFirst = []string{"failed", "partial", "slow", "notsent", "ok"}

const timeFormat = "2006-01-02 15:04:05"

func newPollRecord(target, module string, s *Snapshot) *PollRecord {
	reqs, dropped := s.trace.Requests()
	return makeRecord(target, module, s, reqs, dropped)
}

func makeRecord(target, module string, s *Snapshot, reqs []client.TraceRequest, dropped int) *PollRecord {
	rec := &PollRecord{Start: s.Start, Duration: s.Duration.Round(time.Microsecond), Target: target, Module: module, Projects: s.Projects, Locations: s.Locations}
	for _, r := range reqs {
		if r.HoldOffUntil.After(rec.metUntil) {
			rec.metUntil, rec.retryAfter, rec.heldStatus = r.HoldOffUntil, r.RetryAfter, r.Status
		}
		if r.Status == 401 && r.Reason != "" && rec.Notes == nil {
			rec.Notes = []string{"The service refused the exporter's key (401 Unauthorized): it is wrong, revoked, or sent with another scheme than the one WWW-Authenticate names."}
		}
	}
	if dropped > 0 {
		rec.Notes = append(rec.Notes, fmt.Sprintf("%d more requests were not kept.", dropped))
	}
	rec.HeldOffUntil = slices.MaxFunc([]time.Time{rec.metUntil, s.HoldOffUntil}, time.Time.Compare)
	rec.State, rec.Summary = rec.summarize(s, reqs)
	slices.SortStableFunc(reqs, func(a, b client.TraceRequest) int {
		return cmp.Or(cmp.Compare(slices.Index(client.Endpoints, a.Endpoint), slices.Index(client.Endpoints, b.Endpoint)),
			cmp.Compare(a.Page, b.Page), cmp.Compare(detailID(a.URL), detailID(b.URL)))
	})
	for _, r := range reqs {
		rec.Rows = append(rec.Rows, rec.row(r))
		rec.size += len(rec.Rows[len(rec.Rows)-1].Text) + 32
	}
	slices.SortStableFunc(rec.Rows, func(a, b Row) int {
		return cmp.Compare(slices.Index(worstFirst, a.State), slices.Index(worstFirst, b.State))
	})
	rec.size += len(target) + len(module) + len(rec.Summary) + 256
	return rec
}

func detailID(u string) int64 {
	id, _ := strconv.ParseInt(path.Base(u), 10, 64)
	return id
}

// row renders one request: what was sent, what came back, and the parts of the answer that explain it.
func (rec *PollRecord) row(r client.TraceRequest) Row {
	switch {
	case r.Note != "" && r.NoteFailed:
		return Row{"failed", fmt.Sprintf("%s page %d: FAILED, pagination: %s", r.Endpoint, r.Page, r.Note)}
	case r.Note != "":
		return Row{"ok", fmt.Sprintf("%s page %d: %s", r.Endpoint, r.Page, r.Note)}
	case r.Reason == "" && r.Error != "" && r.Status != 0:
		return Row{"notsent", fmt.Sprintf("%s %s %s -> not sent: %s", r.Endpoint, r.Method, r.URL, heldWords(r.Status, rec.HeldOffUntil, rec.retryAfter))}
	case r.Reason == "" && r.Error != "":
		return Row{"notsent", fmt.Sprintf("%s %s %s -> not sent: %s", r.Endpoint, r.Method, r.URL, r.Error)}
	}
	row, status := Row{State: "ok"}, "no response"
	if r.Status != 0 {
		status = "status " + strconv.Itoa(r.Status)
	}
	lines := []string{fmt.Sprintf("%s %s %s -> %s, %d bytes, %s", r.Endpoint, r.Method, r.URL, status, r.Bytes, r.Duration.Round(time.Microsecond))}
	if r.Phases.FirstByte > 2*time.Second {
		row.State, lines[0] = "slow", lines[0]+", slow"
	}
	if r.Error != "" {
		row.State, lines[0] = "failed", lines[0]+fmt.Sprintf(", %s: %s", r.Reason, r.Error)
	}
	p, body, held := r.Phases, "", ""
	if r.BodyExcerpt != "" {
		body = strconv.Quote(r.BodyExcerpt)
	}
	if !r.HoldOffUntil.IsZero() {
		held = r.HoldOffUntil.UTC().Format(timeFormat) + " UTC"
	}
	d := func(d time.Duration) string { return strings.TrimPrefix(d.Round(time.Microsecond).String(), "0s") }
	for _, h := range [][2]string{{"DNS", d(p.DNS)}, {"Connect", d(p.Connect)}, {"TLS", d(p.TLS)}, {"First byte", d(p.FirstByte)},
		{"Content-Type", r.ContentType}, {"Location", r.Location}, {"WWW-Authenticate", r.WWWAuthenticate},
		{"Retry-After", r.RetryAfter}, {"Held off until", held}, {"Body", body}} {
		if h[1] != "" {
			lines = append(lines, "    "+h[0]+": "+h[1])
		}
	}
	row.Text = strings.Join(lines, "\n")
	return row
}

// WriteText writes rec as plain text, for /polls/<id> and /probe?debug=true.
func (rec *PollRecord) WriteText(w io.Writer) error {
	lines := append([]string{fmt.Sprintf("Poll %d of %s%s\nStarted %s, took %s: %s", rec.ID, rec.Target, strings.TrimSuffix(", module "+rec.Module, ", module "),
		rec.Start.UTC().Format(time.RFC3339Nano), rec.Duration, rec.Summary)}, rec.Notes...)
	if rec.HoldOffPoll != 0 {
		lines = append(lines, fmt.Sprintf("Poll %d met the answer that started the hold-off: /polls/%d", rec.HoldOffPoll, rec.HoldOffPoll))
	}
	for _, r := range rec.Rows {
		lines = append(lines, "\n"+r.Text)
	}
	_, err := io.WriteString(w, strings.Join(lines, "\n")+"\n")
	return err
}

const (
	maxTargets   = maxProbeTargets + 1 // the /probe cache's, plus /metrics
	maxKeptBytes = 32 << 20            // the polls kept of all targets, as PollRecord.size counts them
)

// PollLog keeps the polls of each target polled lately.
type PollLog struct {
	mu      sync.Mutex
	seq     uint64
	targets map[targetKey]TargetState
	bytes   int
}

// TargetState is a target's latest poll and, until one is ok, its first failing poll and the one that met its hold-off.
type TargetState struct{ Latest, Failing, HoldOff *PollRecord }

// targetKey names a target and module: by URL for /probe, by redacted URL for the poll log.
type targetKey struct{ target, module string }

func NewPollLog() *PollLog { return &PollLog{targets: make(map[targetKey]TargetState)} }

// Add keeps rec, numbered, as its target's latest poll; the targets polled longest ago go past the bounds.
func (l *PollLog) Add(rec *PollRecord) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	rec.ID = l.seq
	key := targetKey{rec.Target, rec.Module}
	st := l.targets[key]
	l.bytes -= st.bytes()
	met := st.HoldOff
	if len(rec.Rows) == 0 && rec.heldStatus != 0 {
		for _, o := range l.targets {
			if o.HoldOff != nil && o.HoldOff.metUntil.Equal(rec.HeldOffUntil) {
				met, rec.HoldOffPoll = o.HoldOff, o.HoldOff.ID
				rec.Summary = "sent nothing: " + heldWords(rec.heldStatus, rec.HeldOffUntil, met.retryAfter)
			}
		}
	}
	if !rec.metUntil.IsZero() && (met == nil || rec.metUntil.After(met.metUntil)) {
		met = rec
	}
	st = TargetState{rec, cmp.Or(st.Failing, rec), met}
	if rec.State == "ok" || rec.State == "slow" {
		st = TargetState{Latest: rec}
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

// Section is one of a target's kept polls, titled by what it is to the target.
type Section struct {
	Title string
	*PollRecord
}

// Polls lists st's polls, each once, the latest first.
func (st TargetState) Polls() []Section {
	var out []Section
	for i, r := range []*PollRecord{st.Latest, st.Failing, st.HoldOff} {
		title := [...]string{"Latest poll", "first failing poll", "the poll that started the hold-off"}[i]
		if j := slices.IndexFunc(out, func(s Section) bool { return s.PollRecord == r }); j >= 0 {
			out[j].Title += ", " + title
		} else if r != nil {
			out = append(out, Section{strings.ToUpper(title[:1]) + title[1:], r})
		}
	}
	return out
}

func (st TargetState) bytes() (n int) {
	for _, s := range st.Polls() {
		n += s.size
	}
	return n
}

// Get returns the poll with the given id, if it is still kept.
func (l *PollLog) Get(id uint64) (*PollRecord, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, st := range l.targets {
		polls := st.Polls()
		if i := slices.IndexFunc(polls, func(s Section) bool { return s.ID == id }); i >= 0 {
			return polls[i].PollRecord, true
		}
	}
	return nil, false
}

// Target returns what is kept of a target, by redacted URL and module.
func (l *PollLog) Target(target, module string) (TargetState, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st, ok := l.targets[targetKey{target, module}]
	return st, ok
}

// Targets returns every target polled lately: the worst first, then the one behind /metrics, then the others by URL and module.
func (l *PollLog) Targets() []TargetState {
	l.mu.Lock()
	out := slices.Collect(maps.Values(l.targets))
	l.mu.Unlock()
	slices.SortFunc(out, func(a, b TargetState) int {
		return cmp.Or(cmp.Compare(slices.Index(worstFirst, a.Latest.State), slices.Index(worstFirst, b.Latest.State)),
			cmp.Compare(min(len(a.Latest.Module), 1), min(len(b.Latest.Module), 1)), cmp.Compare(a.Latest.Target, b.Latest.Target), cmp.Compare(a.Latest.Module, b.Latest.Module))
	})
	return out
}

// recordOf returns the kept record of the poll behind s, else a new one.
func (l *PollLog) recordOf(target, module string, s *Snapshot) *PollRecord {
	st, _ := l.Target(target, module)
	polls := st.Polls()
	if i := slices.IndexFunc(polls, func(p Section) bool { return p.Start.Equal(s.Start) }); i >= 0 {
		return polls[i].PollRecord
	}
	return newPollRecord(target, module, s)
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

// heldWords says until when and why requests are held off, quoting the Retry-After obeyed.
func heldWords(status int, until time.Time, retryAfter string) string {
	s := "held off until an unknown time"
	if !until.IsZero() {
		s = "held off until " + until.UTC().Format(timeFormat) + " UTC"
	}
	if status != 0 {
		s += fmt.Sprintf(" after a %d", status)
	}
	if retryAfter != "" {
		s += fmt.Sprintf(" with Retry-After %q", retryAfter)
	}
	return s
}

// failureKind names how a request failed: its reason, status and the cause of a network failure.
func failureKind(err error, status int) string {
	kind := string(client.ReasonOf(err))
	switch {
	case errors.Is(err, errTooLate):
		kind = "too late"
	case errors.Is(err, client.ErrKeyUnavailable):
		kind = "key unavailable"
	}
	if status != 0 {
		kind += " " + strconv.Itoa(status)
	}
	if c, ok := causeWords[client.CauseOf(err)]; ok {
		kind += " (" + c + ")"
	}
	return kind
}

var causeWords = map[string]string{client.CauseConnectionRefused: "connection refused", client.CauseNameNotFound: "name not found",
	client.CauseTLS: "TLS", client.CauseConnectionReset: "connection reset"}

// failures names what failed in s and how, the highest status first, failing detail views by location id.
func failures(s *Snapshot) string {
	kinds, names, statuses := []string(nil), map[string][]string{}, map[string]int{}
	add := func(name, kind string, status int) {
		if names[kind] == nil {
			kinds = append(kinds, kind)
		}
		names[kind], statuses[kind] = append(names[kind], name), status
	}
	detailIDs := map[string][]int64{}
	checked := slices.DeleteFunc(slices.Clone(s.Details), func(d locationState) bool { return d.Checked.Before(s.Start) }) // in this poll
	for _, d := range checked {
		if d.Err != nil && !errors.Is(d.Err, client.ErrHeldOff) {
			k := failureKind(d.Err, d.Status)
			detailIDs[k], statuses[k] = append(detailIDs[k], d.ID), d.Status
		}
	}
	for _, ep := range client.Endpoints {
		st := s.Endpoints[ep]
		if st.Err != nil && !errors.Is(st.Err, client.ErrHeldOff) && !errors.Is(st.Err, errNoDetail) &&
			(ep != client.EndpointLocationDetail || len(detailIDs) == 0) {
			add(string(ep), failureKind(st.Err, st.Status), st.Status)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(detailIDs)) {
		add(string(client.EndpointLocationDetail)+" "+idList(detailIDs[k], len(checked)), k, statuses[k])
	}
	slices.SortStableFunc(kinds, func(a, b string) int { return cmp.Compare(statuses[b], statuses[a]) })
	for i, k := range kinds {
		kinds[i] = strings.Join(names[k], ", ") + " " + k
	}
	return strings.Join(kinds, ", ")
}

// summarize tells how a poll went in one line: what failed, what was not checked or not sent and why, what was slow.
func (rec *PollRecord) summarize(s *Snapshot, reqs []client.TraceRequest) (string, string) {
	notSent, worst := []string(nil), map[client.Endpoint]time.Duration{} // worst: the longest wait for a first byte
	for _, ep := range client.Endpoints {
		if st := s.Endpoints[ep]; errors.Is(st.Err, client.ErrHeldOff) {
			notSent, rec.heldStatus = append(notSent, string(ep)), cmp.Or(rec.heldStatus, st.Status)
		}
	}
	for _, r := range reqs {
		if r.Reason == "" && r.Error != "" && !slices.Contains(notSent, string(r.Endpoint)) {
			notSent = append(notSent, string(r.Endpoint))
		}
		worst[r.Endpoint] = max(worst[r.Endpoint], r.Phases.FirstByte)
	}
	if len(notSent) == len(s.Endpoints) && len(reqs) == 0 {
		return "failed", "sent nothing: " + heldWords(rec.heldStatus, rec.HeldOffUntil, "")
	}
	var words []string
	if f := failures(s); f != "" {
		words = append(words, f)
	}
	if errors.Is(s.Endpoints[client.EndpointLocationDetail].Err, errNoDetail) { // the only endpoint left unchecked
		words = append(words, "not checked: "+string(client.EndpointLocationDetail))
	}
	if notSent != nil {
		words = append(words, "not sent: "+strings.Join(notSent, ", "))
	}
	if notSent != nil || !rec.metUntil.IsZero() {
		words = append(words, heldWords(rec.heldStatus, rec.HeldOffUntil, rec.retryAfter))
	}
	bad, slow := len(words), []string(nil)
	for _, ep := range client.Endpoints {
		if worst[ep] > 2*time.Second { // the first byte's wait that DeploymentServiceAPISlow calls slow
			slow = append(slow, fmt.Sprintf("%s %s", ep, worst[ep].Round(time.Millisecond)))
		}
	}
	if slow != nil {
		words = append(words, "slow: "+strings.Join(slow, ", "))
	}
	switch {
	case !s.up():
		return "failed", "failed: " + strings.Join(words, "; ")
	case bad > 0:
		return "partial", "partial: " + strings.Join(words, "; ")
	case len(words) > 0:
		return "slow", words[0]
	}
	return "ok", "ok"
}

// idList names the first few ids, and how many of all they are.
func idList(ids []int64, all int) string {
	s := strings.Trim(fmt.Sprint(ids[:min(len(ids), 5)]), "[]")
	s = strings.ReplaceAll(s, " ", ", ")
	if len(ids) > 5 {
		s += fmt.Sprintf(" and %d more", len(ids)-5)
	}
	if len(ids) < all {
		s += fmt.Sprintf(" (%d of %d)", len(ids), all)
	}
	return s
}

// failureLog logs one short line per poll: warn when a failure starts or changes kind, debug while it lasts, info when it ends.
type failureLog struct {
	mu          sync.Mutex
	kind, since string // how the run of failures goes, and when it began, in RFC 3339
	polls       int
}

// log writes the line a complete poll calls for; a poll that sent nothing tells nothing new.
func (f *failureLog) log(logger *slog.Logger, s *Snapshot) {
	kind := failures(&Snapshot{Endpoints: s.Endpoints}) // without Details: not which location ids
	errText := ""
	for _, ep := range client.Endpoints {
		if err := s.Endpoints[ep].Err; errText == "" && err != nil && !errors.Is(err, client.ErrHeldOff) && !errors.Is(err, errNoDetail) {
			errText = err.Error()
			if ue := (*url.Error)(nil); errors.As(err, &ue) { // the target label names the URL
				errText = strings.Replace(errText, " "+strconv.Quote(ue.URL), "", 1)
			}
		}
	}
	_, summary := (&PollRecord{HeldOffUntil: s.HoldOffUntil, metUntil: s.HoldOffUntil}).summarize(s, nil)
	summary = bounded(summary, 400)
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case kind == "" && !s.up():
		logger.Debug("Poll sent nothing", "summary", summary)
	case kind == "" && f.kind == "":
	case kind == "":
		logger.Info("Poll recovered", "failing_since", f.since, "failed_polls", f.polls)
		f.kind, f.polls = "", 0
	case kind == f.kind:
		f.polls++
		logger.Debug("Poll still failing", "summary", summary, "failing_since", f.since, "failed_polls", f.polls)
	default:
		if f.kind == "" {
			f.since = s.Start.UTC().Format(time.RFC3339)
		}
		f.kind, f.polls = kind, f.polls+1
		logger.Warn("Poll failed", "summary", summary, "failing_since", f.since, "err", bounded(errText, 300))
	}
}

// bounded cuts s to n bytes: a long one keeps its start and a hash of the whole, to stay distinct.
func bounded(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s…(%08x)", strings.ToValidUTF8(s[:n-16], ""), crc32.ChecksumIEEE([]byte(s)))
}
