package collector

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/deployment-service/deployment_service_exporter/client"
)

// Target is one watched service and what to read from it.
type Target struct {
	Client *client.Client
	// DetailIDs are the locations whose detail views are read on every poll.
	DetailIDs []int64
	// DetailLimit, used when DetailIDs is empty, reads the detail views of
	// the first DetailLimit locations of the list.
	DetailLimit int
	// InfoFields are the detail view fields exposed as info labels.
	InfoFields []string
}

func (t *Target) wantsDetails() bool { return len(t.DetailIDs) > 0 || t.DetailLimit > 0 }

// poll reads the whole API once. Root, both lists and the explicit detail
// views start at once; ids drawn from the list start as soon as the page
// holding them arrives. The client bounds how many requests are in flight,
// so the wall time is the critical path of the round trips.
func poll(ctx context.Context, t *Target, logger *slog.Logger) *Snapshot {
	p := &pollRun{ctx: ctx, t: t, seen: make(map[int64]bool)}
	s := &Snapshot{Start: time.Now(), Endpoints: make(map[client.Endpoint]EndpointState, 4)}

	for _, id := range t.DetailIDs {
		p.detail(id)
	}
	var root client.Result
	var projects, locations client.ListResult
	p.wg.Add(3)
	go func() { defer p.wg.Done(); root = t.Client.Root(ctx) }()
	go func() { defer p.wg.Done(); projects = t.Client.Projects(ctx) }()
	go func() {
		defer p.wg.Done()
		want, onIDs := 0, func([]int64) {}
		if len(t.DetailIDs) == 0 && t.DetailLimit > 0 {
			want = t.DetailLimit
			onIDs = func(ids []int64) {
				for _, id := range ids {
					p.detail(id)
				}
			}
		}
		locations = t.Client.Locations(ctx, want, onIDs)
	}()
	p.wg.Wait()

	s.Duration = time.Since(s.Start)
	s.Endpoints[client.EndpointRoot] = endpointState(root)
	s.Endpoints[client.EndpointProjects] = endpointState(projects.Result)
	s.Endpoints[client.EndpointLocations] = endpointState(locations.Result)
	if projects.Err == nil {
		s.Projects = Count{Value: projects.Count, Known: true}
	}
	if locations.Err == nil {
		s.Locations = Count{Value: locations.Count, Known: true}
	}
	s.Details = p.details
	slices.SortFunc(s.Details, func(a, b LocationState) int { return cmp.Compare(a.ID, b.ID) })
	if p.tried {
		s.Endpoints[client.EndpointLocationDetail] = p.detailState()
	}
	logFailures(logger, s)
	return s
}

// pollRun gathers the detail views of one poll as they finish.
type pollRun struct {
	ctx context.Context
	t   *Target
	wg  sync.WaitGroup

	mu                  sync.Mutex
	seen                map[int64]bool
	details             []LocationState
	tried               bool
	firstStart, lastEnd time.Time
	lastStatus          int
	lastStatusEnd       time.Time
	detailErr           error
}

// detail starts the detail view of id, once per poll even when a shifting
// list shows an id twice.
func (p *pollRun) detail(id int64) {
	p.mu.Lock()
	if p.seen[id] {
		p.mu.Unlock()
		return
	}
	p.seen[id] = true
	p.mu.Unlock()

	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		start := time.Now()
		r := p.t.Client.LocationDetail(p.ctx, id, p.t.InfoFields)
		end := time.Now()
		p.mu.Lock()
		defer p.mu.Unlock()
		p.details = append(p.details, LocationState{ID: id, Status: r.Status, Duration: r.Duration, Err: r.Err, Fields: r.Fields})
		if !p.tried || start.Before(p.firstStart) {
			p.firstStart = start
		}
		p.tried = true
		p.lastEnd = maxTime(p.lastEnd, end)
		if r.Status != 0 && !end.Before(p.lastStatusEnd) {
			p.lastStatus, p.lastStatusEnd = r.Status, end
		}
		if r.Err != nil && p.detailErr == nil {
			p.detailErr = r.Err
		}
	}()
}

// detailState sums up the detail views as the location_detail endpoint:
// up when every one answered well, timed from the first start to the last
// end, with the status of the last response.
func (p *pollRun) detailState() EndpointState {
	return EndpointState{Status: p.lastStatus, Duration: p.lastEnd.Sub(p.firstStart), Err: p.detailErr}
}

func endpointState(r client.Result) EndpointState {
	return EndpointState{Status: r.Status, Duration: r.Duration, Err: r.Err}
}

// logFailures logs one line per failed endpoint and one line for all
// failed detail views, so a broken API does not flood the log.
func logFailures(logger *slog.Logger, s *Snapshot) {
	for _, ep := range client.Endpoints {
		st, ok := s.Endpoints[ep]
		if !ok || st.OK() || ep == client.EndpointLocationDetail {
			continue
		}
		logEndpointError(logger, ep, st.Status, st.Err, "Endpoint failed")
	}
	failed := 0
	for _, d := range s.Details {
		if d.Err != nil {
			failed++
			logger.Debug("Location detail failed", "location_id", d.ID, "status", d.Status, "err", d.Err)
		}
	}
	if failed > 0 {
		st := s.Endpoints[client.EndpointLocationDetail]
		logger.Warn("Location details failed", "failed", failed, "of", len(s.Details), "last_status", st.Status, "err", st.Err)
	}
}

func logEndpointError(logger *slog.Logger, ep client.Endpoint, status int, err error, msg string) {
	if errors.Is(err, client.ErrHeldOff) {
		logger.Debug(msg, "endpoint", ep, "status", status, "err", err)
		return
	}
	logger.Warn(msg, "endpoint", ep, "reason", client.ReasonOf(err), "status", status, "err", err)
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
