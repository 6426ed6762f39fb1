package collector

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/deployment-service/deployment_service_exporter/client"
	"github.com/deployment-service/deployment_service_exporter/sampleservice"
)

// inOrder answers the detail views of ids one after the other, each only
// once the poll has recorded the result of the one before it, so that
// "the last response" is known.
func inOrder(recorded func(id int64) bool, ids ...int64) func(http.Handler) http.Handler {
	prev := make(map[string]int64, len(ids))
	for i, id := range ids {
		if i > 0 {
			prev["/api/projects/locations/"+strconv.FormatInt(id, 10)+"/"] = ids[i-1]
		}
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if id, ok := prev[r.URL.Path]; ok {
				tick := time.NewTicker(time.Millisecond)
				defer tick.Stop()
				for !recorded(id) {
					select {
					case <-tick.C:
					case <-r.Context().Done():
						return
					}
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}

// TestLocationDetailStatus checks location_detail's status code: the
// highest status among the failed detail views, 0 when none of them got a
// response, 200 when none failed, whatever order the answers came in.
func TestLocationDetailStatus(t *testing.T) {
	tests := []struct {
		name   string
		faults map[int64]sampleservice.Fault
		// order is the order in which the detail views are answered.
		order  []int64
		up     string
		status string
	}{
		{"all well", nil, []int64{1, 2, 3}, "1", "200"},
		{"refused, then fine", map[int64]sampleservice.Fault{1: {Status: 403}}, []int64{1, 2, 3}, "0", "403"},
		{"not found last", map[int64]sampleservice.Fault{3: {Status: 404}}, []int64{1, 2, 3}, "0", "404"},
		{"the highest of the failed", map[int64]sampleservice.Fault{1: {Status: 500}, 2: {Status: 404}}, []int64{1, 3, 2}, "0", "500"},
		{"a failure with a response beats one without", map[int64]sampleservice.Fault{1: {Status: 401}, 2: {Delay: time.Minute}}, []int64{1, 3}, "0", "401"},
		{"no response among the failed", map[int64]sampleservice.Fault{1: {Delay: time.Minute}}, []int64{2, 3}, "0", "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r *rig
			r = newRig(t, rigOptions{
				service:   sampleservice.Options{Locations: 10},
				detailIDs: []int64{1, 2, 3},
				wrap:      inOrder(func(id int64) bool { return r.poller.recorded(id) }, tt.order...),
			})
			delayed := false
			for id, f := range tt.faults {
				r.svc.SetDetailFault(int(id), f)
				delayed = delayed || f.Delay > 0
			}
			// Views usually take a microsecond here, so the delayed one,
			// cut by the deadline after far longer, is slow on its own
			// rather than cut short, whatever the machine's timing.
			for range len(r.poller.book.recent) {
				r.poller.book.observe(time.Microsecond)
			}
			polled := make(chan *Snapshot, 1)
			go func() { polled <- r.poller.Poll(context.Background()) }()
			if delayed {
				// A delayed view ends with the poll, once every other
				// result is in: a timeout, no response.
				waitFor(t, func() bool { return r.poller.listsRecorded() && r.poller.recorded(tt.order...) })
				r.expireNow(t)
			}
			reg := r.registry(<-polled)
			compare(t, reg, endpointUpHelp+`deployment_service_endpoint_up{endpoint="location_detail"} `+tt.up+`
deployment_service_endpoint_up{endpoint="locations"} 1
deployment_service_endpoint_up{endpoint="projects"} 1
deployment_service_endpoint_up{endpoint="root"} 1
`+statusHelp+`deployment_service_endpoint_status_code{endpoint="location_detail"} `+tt.status+`
deployment_service_endpoint_status_code{endpoint="locations"} 200
deployment_service_endpoint_status_code{endpoint="projects"} 200
deployment_service_endpoint_status_code{endpoint="root"} 200
`, "deployment_service_endpoint_up", "deployment_service_endpoint_status_code")
		})
	}
}

// TestLocationDetailWhileViewsAreOut checks the snapshot of a scrape that
// answers while a detail view is still out: it is no failure, and its
// location, never checked, has no series; location_detail sums up the
// views that did answer.
func TestLocationDetailWhileViewsAreOut(t *testing.T) {
	for _, tt := range []struct {
		name   string
		fault  sampleservice.Fault
		status int
		up     bool
	}{
		{"the other answered well", sampleservice.Fault{}, 200, true},
		{"the other was refused", sampleservice.Fault{Status: 403}, 403, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := newGate(t)
			r := newRig(t, rigOptions{
				service:   sampleservice.Options{Locations: 10},
				detailIDs: []int64{1, 2},
				timeout:   time.Minute,
				wrap: func(next http.Handler) http.Handler {
					held := g.wrap(next)
					return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						if strings.HasSuffix(r.URL.Path, "/locations/2/") {
							held.ServeHTTP(w, r)
							return
						}
						next.ServeHTTP(w, r)
					})
				},
			})
			r.svc.SetDetailFault(1, tt.fault)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan *Snapshot, 1)
			go func() { done <- r.poller.Poll(ctx) }()
			// The second view is held; wait for the first one's result.
			waitFor(t, func() bool { return r.poller.recorded(1) })
			cancel()
			s := <-done
			st := s.Endpoints[client.EndpointLocationDetail]
			if st.ok() != tt.up || st.Status != tt.status {
				t.Errorf("location_detail up %v, status %d; want %v with %d", st.ok(), st.Status, tt.up, tt.status)
			}
			if len(s.Details) != 1 || s.Details[0].ID != 1 {
				t.Errorf("details %+v, want location 1 alone", s.Details)
			}
		})
	}
}

// recorded tells whether the poll in flight has the results of the detail
// views of ids.
func (p *Poller) recorded(ids ...int64) bool {
	run := p.runNow()
	if run == nil {
		return false
	}
	for _, id := range ids {
		if run.book.lastChecked(id).Before(run.start) {
			return false
		}
	}
	return true
}

// listsRecorded tells whether the poll in flight has the results of root
// and both lists.
func (p *Poller) listsRecorded() bool {
	run := p.runNow()
	if run == nil {
		return false
	}
	run.mu.Lock()
	defer run.mu.Unlock()
	return len(run.lists) == 3
}

// runNow returns the poll in flight, nil when there is none.
func (p *Poller) runNow() *pollRun {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inflight == nil {
		return nil
	}
	return p.inflight
}

// TestDetailSummary checks the folding of detail views, and of failures
// that stand for detail views, into location_detail.
func TestDetailSummary(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	fail := errors.New("x")
	type view struct {
		status int
		err    error
	}
	tests := []struct {
		name  string
		views []view
		fails []view
		want  int
		ok    bool
	}{
		{"all well", []view{{200, nil}, {204, nil}}, nil, 200, true},
		{"one refused among good ones", []view{{403, fail}, {200, nil}}, nil, 403, false},
		{"highest failed, not last", []view{{500, fail}, {404, fail}, {200, nil}}, nil, 500, false},
		{"failed without a response", []view{{0, fail}, {200, nil}}, nil, 0, false},
		{"a failure folded in, no view tried", nil, []view{{200, fail}}, 200, false},
		{"a failure folded in next to good views", []view{{200, nil}}, []view{{0, fail}}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d detailSummary
			for i, v := range tt.views {
				start := t0.Add(time.Duration(i) * time.Second)
				d.add(start, start.Add(time.Second), v.status, v.err)
			}
			for _, v := range tt.fails {
				d.fail(v.status, v.err)
			}
			if got := d.status(); got != tt.want {
				t.Errorf("status %d, want %d", got, tt.want)
			}
			if ok := d.err == nil; ok != tt.ok {
				t.Errorf("up %v, want %v", ok, tt.ok)
			}
		})
	}
}
