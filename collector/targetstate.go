package collector

import (
	"cmp"
	"net/url"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/deployment-service/deployment_service_exporter/client"
)

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
	targets map[targetKey]*TargetState
	bytes   int
	recent  int
}

// TargetState is one target's latest poll and, until one is ok again, its first
// failing poll and the one that met the answer starting its hold-off.
type TargetState struct {
	Latest, Failing, HoldOff *PollRecord
}

type targetKey struct{ target, module string }

// NewPollLog returns a log whose Recent lists as many as recent polls.
func NewPollLog(recent int) *PollLog {
	return &PollLog{targets: make(map[targetKey]*TargetState), recent: recent}
}

// Add keeps rec, with the next id, as the latest poll of its target; the
// least recently polled targets go past maxTargets or maxKeptBytes.
func (l *PollLog) Add(rec *PollRecord) {
	rec.metUntil, rec.size = holdOffEnd(rec.Requests), rec.bytes()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	rec.ID = l.seq
	key := targetKey{rec.Target, rec.Module}
	st := l.targets[key]
	if st == nil {
		st = &TargetState{}
		l.targets[key] = st
	}
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
	l.bytes += st.bytes()
	for len(l.targets) > 1 && (len(l.targets) > maxTargets || l.bytes > maxKeptBytes) {
		l.evictOldest(key)
	}
}

// records lists st's polls, each once.
func (st *TargetState) records() []*PollRecord {
	var out []*PollRecord
	for _, r := range []*PollRecord{st.Latest, st.Failing, st.HoldOff} {
		if r != nil && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

func (st *TargetState) bytes() int {
	n := 0
	for _, r := range st.records() {
		n += r.size
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

// evictOldest drops the least recently polled target but keep.
func (l *PollLog) evictOldest(keep targetKey) {
	var oldest targetKey
	var id uint64
	for k, st := range l.targets {
		if k != keep && (id == 0 || st.Latest.ID < id) {
			oldest, id = k, st.Latest.ID
		}
	}
	l.bytes -= l.targets[oldest].bytes()
	delete(l.targets, oldest)
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

// view copies rec for the pages, with the id of the poll that met its hold-off.
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

func (l *PollLog) viewState(st *TargetState) TargetState {
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
		for _, r := range st.records() {
			if r.ID == id {
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
	if st, ok := l.targets[targetKey{target, module}]; ok {
		return l.viewState(st), true
	}
	return TargetState{}, false
}

// Targets returns the state of every target polled lately: the service
// behind /metrics first, then the /probe targets by URL and module.
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

// TargetPage is a target's page under the external URL, "" without one.
func TargetPage(external *url.URL, target, module string) string {
	if external == nil {
		return ""
	}
	u := *external
	u.Path = strings.TrimSuffix(u.Path, "/") + "/target"
	u.RawPath, u.RawQuery, u.Fragment = "", TargetQuery(target, module), ""
	return u.String()
}

// TargetQuery is the query of a target's page, without module for /metrics.
func TargetQuery(target, module string) string {
	q := url.Values{"target": {target}}
	if module != "" {
		q.Set("module", module)
	}
	return q.Encode()
}
