package collector

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deployment-service/deployment_service_exporter/client"
)

// fakeService is a deployment service in memory, for polls in a synctest
// bubble: each view answers after its delay, unless its context ends first.
type fakeService struct {
	locations   int
	pageSize    int                      // ids per page of the location list; 0 for one page
	delay       map[string]time.Duration // by view ("root", "location_detail/3") or endpoint
	status      map[string]int           // a failing status, by view or endpoint
	concurrency int
	rateLimited bool

	mu        sync.Mutex
	calls     []string // the views asked for, in order
	ends      map[string]time.Time
	inFlight  int
	most      int // the most views in flight at once
	holdUntil time.Time
}

func newFake(locations int, delays ...any) *fakeService {
	f := &fakeService{locations: locations, delay: map[string]time.Duration{}, status: map[string]int{}, concurrency: 4, ends: map[string]time.Time{}}
	for i := 0; i+1 < len(delays); i += 2 {
		f.delay[delays[i].(string)] = delays[i+1].(time.Duration)
	}
	return f
}

func (f *fakeService) of(m map[string]int, view string, ep client.Endpoint) int {
	if v, ok := m[view]; ok {
		return v
	}
	return m[string(ep)]
}

// view answers one view after its delay, as the client would report it.
func (f *fakeService) view(ctx context.Context, ep client.Endpoint, view string) client.Result {
	f.mu.Lock()
	f.calls = append(f.calls, view)
	f.inFlight++
	f.most = max(f.most, f.inFlight)
	d, ok := f.delay[view]
	if !ok {
		d = f.delay[string(ep)]
	}
	status, held := f.of(f.status, view, ep), time.Now().Before(f.holdUntil)
	f.mu.Unlock()
	start := time.Now()
	defer func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.inFlight--
		f.ends[view] = time.Now()
	}()
	if held {
		return client.Result{Status: http.StatusTooManyRequests, Err: &client.Error{Endpoint: ep, Err: client.ErrHeldOff}}
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
		return client.Result{Duration: time.Since(start), Err: &client.Error{Endpoint: ep, Reason: client.ReasonTimeout, Err: context.Cause(ctx)}}
	}
	if status == http.StatusTooManyRequests {
		f.mu.Lock()
		f.holdUntil = time.Now().Add(time.Hour)
		f.mu.Unlock()
	}
	if status != 0 {
		return client.Result{Status: status, Duration: time.Since(start), Err: &client.Error{Endpoint: ep, Reason: client.ReasonHTTPStatus, Status: status, Err: errors.New("refused")}}
	}
	return client.Result{Status: http.StatusOK, Duration: time.Since(start)}
}

func (f *fakeService) Root(ctx context.Context) client.Result {
	return f.view(ctx, client.EndpointRoot, "root")
}

func (f *fakeService) Projects(ctx context.Context) client.ListResult {
	return client.ListResult{Result: f.view(ctx, client.EndpointProjects, "projects"), Count: 3}
}

// Locations hands the ids of each page on as it arrives, each page taking the list's delay.
func (f *fakeService) Locations(ctx context.Context, wantIDs int, onIDs func([]int64)) client.ListResult {
	size := f.pageSize
	if size == 0 {
		size = max(f.locations, 1)
	}
	var res client.ListResult
	for from := 0; from == 0 || from < f.locations; from += size {
		page := fmt.Sprintf("locations?page=%d", from/size+1)
		if res.Result = f.view(ctx, client.EndpointLocations, page); res.Err != nil {
			return res
		}
		var ids []int64
		for id := from + 1; id <= min(from+size, f.locations, wantIDs); id++ {
			ids = append(ids, int64(id))
		}
		res.IDs = append(res.IDs, ids...)
		onIDs(ids)
	}
	res.Count = int64(f.locations)
	return res
}

func (f *fakeService) LocationDetail(ctx context.Context, id int64, _ []string) client.DetailResult {
	return client.DetailResult{Result: f.view(ctx, client.EndpointLocationDetail, "location_detail/"+strconv.FormatInt(id, 10))}
}

func (f *fakeService) HoldOff() (time.Time, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.holdUntil, http.StatusTooManyRequests
}

func (f *fakeService) Concurrency() int  { return f.concurrency }
func (f *fakeService) RateLimited() bool { return f.rateLimited }
func (f *fakeService) Close()            {}

// asked returns the views asked for so far, those of detail views as ids.
func (f *fakeService) asked() (lists []string, details []int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, v := range f.calls {
		if id, ok := strings.CutPrefix(v, "location_detail/"); ok {
			n, _ := strconv.ParseInt(id, 10, 64)
			details = append(details, n)
		} else {
			lists = append(lists, v)
		}
	}
	return lists, details
}

// answer is a scrape's snapshot and when it came.
type answer struct {
	*Snapshot
	at time.Time
}

// scrapeAt polls p for a scrape with the given budget, in a goroutine of the bubble.
func scrapeAt(p *Poller, budget time.Duration) <-chan answer {
	out := make(chan answer, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), budget)
		defer cancel()
		s := p.Poll(ctx)
		out <- answer{s, time.Now()}
	}()
	return out
}

// TestPollEndsWhenItsWorkEnds is issue 28's example: 20 locations, detail
// views of 1 s, one request at a time, a 3 s scrape timeout. Once no view
// left can end before the deadline, the poll ends and the scrape answers,
// and scrape_duration_seconds says when.
func TestPollEndsWhenItsWorkEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(20, string(client.EndpointLocationDetail), time.Second)
		f.concurrency = 1
		p := NewPoller(&Target{Client: f, DetailLimit: 20}, PollerOptions{Timeout: time.Minute})
		m := NewMetrics(nil)
		h := NewHandler(p, m, nil, time.Minute, nil)
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.Header.Set(scrapeTimeoutHeader, "3")
		begin := time.Now()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		answered := time.Since(begin)
		_, details := f.asked()
		lastEnd := f.ends["location_detail/"+strconv.Itoa(len(details))].Sub(begin)
		if answered >= 2600*time.Millisecond || answered-lastEnd > 300*time.Millisecond {
			t.Errorf("answered after %v, the last detail view ended after %v: want under 2.6 s and within 0.3 s of it", answered, lastEnd)
		}
		want := fmt.Sprintf("deployment_service_scrape_duration_seconds %g\n", answered.Seconds())
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("the answer lacks %q", want)
		}
	})
}

// TestSharedPoll: scrapes share the poll in flight; it runs to the latest
// deadline among them, each answers by its own, and it ends when the last leaves.
func TestSharedPoll(t *testing.T) {
	for _, tt := range []struct {
		name    string
		budgets []time.Duration // of scrapes coming 100 ms apart
		want    []int           // detail views each answer holds
		answers []time.Duration // when each answers
		views   int             // detail views asked for in all
	}{
		{"twenty scrapes, one poll", slices.Repeat([]time.Duration{3 * time.Second}, 20), slices.Repeat([]int{2}, 20), slices.Repeat([]time.Duration{2 * time.Second}, 20), 2},
		{"a later scrape with more time", []time.Duration{3 * time.Second, 10 * time.Second}, []int{2, 10}, []time.Duration{2950 * time.Millisecond, 10 * time.Second}, 10},
		{"an earlier scrape with more time", []time.Duration{10 * time.Second, 3 * time.Second}, []int{9, 3}, []time.Duration{9 * time.Second, 3050 * time.Millisecond}, 9},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFake(20, string(client.EndpointLocationDetail), time.Second)
				f.concurrency = 1
				p := NewPoller(&Target{Client: f, DetailLimit: 20}, PollerOptions{Timeout: time.Minute})
				begin := time.Now()
				var answers []<-chan answer
				for i, b := range tt.budgets {
					if i > 0 && len(tt.budgets) < 20 {
						time.Sleep(100 * time.Millisecond)
					}
					answers = append(answers, scrapeAt(p, b))
				}
				for i, a := range answers {
					s := <-a
					if got := len(s.checkedDetails()); got != tt.want[i] {
						t.Errorf("scrape %d: %d detail views checked, want %d", i, got, tt.want[i])
					}
					if got := s.at.Sub(begin); got > tt.answers[i] {
						t.Errorf("scrape %d answered after %v, want by %v", i, got, tt.answers[i])
					}
				}
				synctest.Wait()
				if lists, details := f.asked(); len(lists) != 3 || len(details) != tt.views {
					t.Errorf("the service was asked %v and %d detail views, want one poll of %d", lists, len(details), tt.views)
				}
			})
		})
	}
}

func ids(details []locationState) []int64 {
	out := make([]int64, len(details))
	for i, d := range details {
		out[i] = d.ID
	}
	return out
}
