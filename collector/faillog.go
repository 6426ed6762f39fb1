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

// failureLog logs a failure at warn when it starts or changes kind, at debug while it lasts and at info when it ends.
type failureLog struct {
	mu      sync.Mutex
	failing map[client.Endpoint]*failingRun
}

// failingRun is a run of polls in which an endpoint failed, kind ("http_status 401") naming how.
type failingRun struct {
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
	for _, d := range checked {
		if d.Err != nil {
			logger.Debug("Location detail failed", "location_id", d.ID, "status", d.Status, "err", d.Err)
		}
	}
	st, ok := s.Endpoints[client.EndpointLocationDetail]
	if !ok {
		return // a run of failures stays open until a detail view is asked for
	}
	all := detailFailures(s)
	held := len(all) > 0
	kinds := slices.DeleteFunc(all, func(k failure) bool { return k.what == "held off" })
	if held && len(kinds) == 0 {
		logger.Debug("Location details not polled: holding off", "status", st.Status)
		return
	}
	slices.SortFunc(kinds, func(a, b failure) int { return cmp.Or(cmp.Compare(b.status, a.status), cmp.Compare(a.what, b.what)) })
	names := make([]string, len(kinds))
	failed := 0
	for i, k := range kinds {
		names[i], failed = k.kind, failed+k.n
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

// failingIDs names the first five failing locations of checked, and how many more.
func failingIDs(checked []locationState) string {
	var ids []string
	for _, d := range checked {
		if d.Err != nil {
			ids = append(ids, strconv.FormatInt(d.ID, 10))
		}
	}
	if len(ids) > 5 {
		return fmt.Sprintf("%s and %d more", strings.Join(ids[:5], ","), len(ids)-5)
	}
	return strings.Join(ids, ",")
}
