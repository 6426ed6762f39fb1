package collector

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/deployment-service/deployment_service_exporter/client"
)

// failureLog decides how loud the failures of a target's polls are. A
// revoked key fails every scrape the same way; logging it at warn level
// each time buries everything else. So a failure is logged at warn when it
// starts or changes kind (endpoint × reason × status), at debug while it
// lasts, and at info once when the endpoint answers well again. The detail
// views are followed as one, like their summary line. Each Poller keeps
// one, so each /probe target × module is followed on its own.
//
// A poll that sent nothing because of a hold-off, or that every scrape
// abandoned, tells nothing new and leaves the state as it was; the
// hold-off itself is logged once by the Poller.
type failureLog struct {
	mu      sync.Mutex
	failing map[client.Endpoint]*failingRun
}

// failingRun is a run of polls in which an endpoint failed.
type failingRun struct {
	// kind is the reason and status of the failure ("http_status 401"),
	// for the detail views every kind among the failed ones.
	kind  string
	since time.Time
	polls int
}

// log writes the lines a complete poll calls for.
func (f *failureLog) log(logger *slog.Logger, s *Snapshot) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failing == nil {
		f.failing = make(map[client.Endpoint]*failingRun)
	}
	for _, ep := range []client.Endpoint{client.EndpointRoot, client.EndpointProjects, client.EndpointLocations} {
		st, ok := s.Endpoints[ep]
		if !ok {
			continue
		}
		if errors.Is(st.Err, client.ErrHeldOff) {
			logger.Debug("Endpoint not polled: holding off", "endpoint", ep, "status", st.Status)
			continue
		}
		kind := ""
		if !st.ok() {
			kind = failure{failureKind(st.Err), st.Status}.String()
		}
		f.step(s.Start, ep, kind, endpointLines{logger: logger.With("endpoint", ep), st: st})
	}
	f.logDetails(logger, s)
}

// logDetails follows the detail views as one: their kinds of failure
// together, with one line that sums them up.
func (f *failureLog) logDetails(logger *slog.Logger, s *Snapshot) {
	checked := s.checkedDetails()
	for _, d := range checked {
		if d.Err != nil {
			logger.Debug("Location detail failed", "location_id", d.ID, "status", d.Status, "err", d.Err)
		}
	}
	st, ok := s.Endpoints[client.EndpointLocationDetail]
	if !ok {
		// No detail view was asked for in this poll; a run of failures
		// stays open until one is.
		return
	}
	tally := detailFailures(s)
	var kinds []failure
	failed := 0
	for _, k := range tally.order {
		if k.what == failureKind(client.ErrHeldOff) {
			continue
		}
		kinds = append(kinds, k)
		failed += tally.count[k]
	}
	if len(kinds) == 0 && len(tally.order) > 0 {
		logger.Debug("Location details not polled: holding off", "status", st.Status)
		return
	}
	slices.SortFunc(kinds, func(a, b failure) int { return cmp.Or(cmp.Compare(b.status, a.status), cmp.Compare(a.what, b.what)) })
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.String()
	}
	f.step(s.Start, client.EndpointLocationDetail, strings.Join(names, ", "), detailLines{
		logger: logger, st: st, failed: failed, total: len(checked), ids: failingIDs(checked),
	})
}

// lines writes the log lines of one endpoint's failure run.
type lines interface {
	started(kind, previously string, since time.Time)
	repeated(kind string, since time.Time, polls int)
	recovered(since time.Time, polls int)
}

// step moves ep's failure run on by one poll started at start, whose
// failure is kind ("" when the endpoint answered well), and logs what
// that calls for.
func (f *failureLog) step(start time.Time, ep client.Endpoint, kind string, l lines) {
	run := f.failing[ep]
	switch {
	case kind == "" && run == nil:
	case kind == "":
		delete(f.failing, ep)
		l.recovered(run.since, run.polls)
	case run == nil:
		f.failing[ep] = &failingRun{kind: kind, since: start, polls: 1}
		l.started(kind, "", start)
	case run.kind != kind:
		previously := run.kind
		run.kind, run.polls = kind, run.polls+1
		l.started(kind, previously, run.since)
	default:
		run.polls++
		l.repeated(kind, run.since, run.polls)
	}
}

func sinceAttr(t time.Time) slog.Attr {
	return slog.String("failing_since", t.UTC().Format(time.RFC3339))
}

// endpointLines logs the root and the lists, one line per failure.
type endpointLines struct {
	logger *slog.Logger
	st     endpointState
}

func (e endpointLines) started(_, previously string, since time.Time) {
	args := []any{"reason", client.ReasonOf(e.st.Err), "status", e.st.Status, "err", e.st.Err}
	if previously != "" {
		args = append(args, "previously", previously, sinceAttr(since))
	}
	e.logger.Warn("Endpoint failed", args...)
}

func (e endpointLines) repeated(_ string, since time.Time, polls int) {
	e.logger.Debug("Endpoint still failing", "reason", client.ReasonOf(e.st.Err), "status", e.st.Status, "err", e.st.Err, sinceAttr(since), "failed_polls", polls)
}

func (e endpointLines) recovered(since time.Time, polls int) {
	e.logger.Info("Endpoint recovered", sinceAttr(since), "failed_polls", polls)
}

// detailLines logs the detail views, one line for all of them.
type detailLines struct {
	logger        *slog.Logger
	st            endpointState
	failed, total int
	// ids names the first few failing locations.
	ids string
}

// shownIDs is how many failing locations a log line names.
const shownIDs = 5

// failingIDs names the first few failing locations of checked, by id,
// and how many more there are.
func failingIDs(checked []locationState) string {
	var ids []string
	more := 0
	for _, d := range checked {
		switch {
		case d.Err == nil:
		case len(ids) < shownIDs:
			ids = append(ids, strconv.FormatInt(d.ID, 10))
		default:
			more++
		}
	}
	out := strings.Join(ids, ",")
	if more > 0 {
		out += fmt.Sprintf(" and %d more", more)
	}
	return out
}

func (d detailLines) started(kind, previously string, since time.Time) {
	args := []any{"failed", d.failed, "total", d.total, "location_ids", d.ids, "kinds", kind, "status", d.st.Status, "err", d.st.Err}
	if previously != "" {
		args = append(args, "previously", previously, sinceAttr(since))
	}
	d.logger.Warn("Location details failed", args...)
}

func (d detailLines) repeated(kind string, since time.Time, polls int) {
	d.logger.Debug("Location details still failing", "failed", d.failed, "total", d.total, "location_ids", d.ids, "kinds", kind, "status", d.st.Status, "err", d.st.Err, sinceAttr(since), "failed_polls", polls)
}

func (d detailLines) recovered(since time.Time, polls int) {
	d.logger.Info("Location details recovered", "total", d.total, sinceAttr(since), "failed_polls", polls)
}
