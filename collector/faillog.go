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

// failureLog logs a failure at warn when it starts or changes kind, at debug while
// it lasts and at info when it ends; detail views are followed as one.
type failureLog struct {
	mu      sync.Mutex
	failing map[client.Endpoint]*failingRun
}

// failingRun is a run of polls in which an endpoint failed.
type failingRun struct {
	// kind is the reason and status ("http_status 401"), every failed kind for details.
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
		f.step(logger.With("endpoint", ep), "Endpoint", s.Start, ep, kind, "reason", client.ReasonOf(st.Err), "status", st.Status, "err", st.Err)
	}
	f.logDetails(logger, s)
}

// logDetails follows the detail views as one, with one line that sums them up.
func (f *failureLog) logDetails(logger *slog.Logger, s *Snapshot) {
	checked := s.checkedDetails()
	for _, d := range checked {
		if d.Err != nil {
			logger.Debug("Location detail failed", "location_id", d.ID, "status", d.Status, "err", d.Err)
		}
	}
	st, ok := s.Endpoints[client.EndpointLocationDetail]
	if !ok {
		// No detail view was asked for: a run of failures stays open until one is.
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
	kind := strings.Join(names, ", ")
	f.step(logger, "Location details", s.Start, client.EndpointLocationDetail, kind,
		"failed", failed, "total", len(checked), "location_ids", failingIDs(checked), "kinds", kind, "status", st.Status, "err", st.Err)
}

// step moves ep's run of failures on by one poll, kind "" when it answered well, and logs it.
func (f *failureLog) step(logger *slog.Logger, what string, start time.Time, ep client.Endpoint, kind string, attrs ...any) {
	run := f.failing[ep]
	switch {
	case kind == "" && run == nil:
	case kind == "":
		delete(f.failing, ep)
		logger.Info(what+" recovered", sinceAttr(run.since), "failed_polls", run.polls)
	case run == nil:
		f.failing[ep] = &failingRun{kind: kind, since: start, polls: 1}
		logger.Warn(what+" failed", attrs...)
	case run.kind != kind:
		previously := run.kind
		run.kind, run.polls = kind, run.polls+1
		logger.Warn(what+" failed", append(attrs, "previously", previously, sinceAttr(run.since))...)
	default:
		run.polls++
		logger.Debug(what+" still failing", append(attrs, sinceAttr(run.since), "failed_polls", run.polls)...)
	}
}

func sinceAttr(t time.Time) slog.Attr {
	return slog.String("failing_since", t.UTC().Format(time.RFC3339))
}

// shownIDs is how many failing locations a log line names.
const shownIDs = 5

// failingIDs names the first few failing locations of checked, and how many more.
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
