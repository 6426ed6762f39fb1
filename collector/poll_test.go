package collector

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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
	starts    map[string]time.Time
	ends      map[string]time.Time
	inFlight  int
	most      int // the most views in flight at once
	holdUntil time.Time
}

func newFake(locations int, delays ...any) *fakeService {
	f := &fakeService{locations: locations, delay: map[string]time.Duration{}, status: map[string]int{}, concurrency: 4, starts: map[string]time.Time{}, ends: map[string]time.Time{}}
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
	f.starts[view] = time.Now()
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
	timer := time.NewTimer(max(d, time.Microsecond)) // sent and answered, never in no time
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
	took := time.Since(start)
	if status != 0 {
		return client.Result{Status: status, Duration: took, Err: &client.Error{Endpoint: ep, Reason: client.ReasonHTTPStatus, Status: status, Err: errors.New("refused")}}
	}
	return client.Result{Status: http.StatusOK, Duration: took}
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
		h := NewHandler(p, m, nil, prometheus.NewRegistry(), time.Minute, nil)
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

// TestScrapeAnswersWithinTheScrapeTimeout has the location list never
// answer: the scrape answers by the deadline that the scrape timeout header
// sets, the list down without a count and the rest up.
func TestScrapeAnswersWithinTheScrapeTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(10, "locations", time.Hour)
		h := NewHandler(NewPoller(&Target{Client: f}, PollerOptions{Timeout: time.Minute}), NewMetrics(nil), nil, prometheus.NewRegistry(), time.Minute, nil)
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.Header.Set(scrapeTimeoutHeader, "2")
		begin := time.Now()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if took, budget := time.Since(begin), scrapeBudget(req, time.Minute); took > budget {
			t.Errorf("the scrape answered after %v, past its budget of %v", took, budget)
		}
		body := rec.Body.String()
		for _, want := range []string{
			`deployment_service_endpoint_up{endpoint="root"} 1`, `deployment_service_endpoint_up{endpoint="projects"} 1`,
			`deployment_service_endpoint_up{endpoint="locations"} 0`, `deployment_service_endpoint_status_code{endpoint="locations"} 0`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("the answer lacks %s", want)
			}
		}
		if strings.Contains(body, "deployment_service_locations ") {
			t.Error("a timed-out list reported a count")
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
					if got := s.at.Sub(begin).Round(time.Millisecond); got > tt.answers[i] {
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

func TestPollNeverOutlastsTheTimeout(t *testing.T) {
	now := time.Now()
	p := NewPoller(&Target{Client: newFake(0)}, PollerOptions{Timeout: time.Second, TimeoutName: "--api.timeout"})
	limit := now.Add(time.Second)
	for _, tt := range []struct {
		name     string
		deadline time.Duration
		header   string
		want     time.Time
		by       string
	}{
		{"shorter", 300 * time.Millisecond, "", now.Add(300 * time.Millisecond), "the scrape's deadline"},
		{"shorter, from the header", 300 * time.Millisecond, "0.35", now.Add(300 * time.Millisecond), "the scrape timeout of 0.35s (X-Prometheus-Scrape-Timeout-Seconds, less a margin to answer)"},
		{"longer", time.Hour, "3600", limit, "--api.timeout=1s"},
		{"none", 0, "", limit, "--api.timeout=1s"},
	} {
		ctx := context.WithValue(context.Background(), scrapeTimeoutKey{}, tt.header)
		if tt.deadline > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, now.Add(tt.deadline))
			defer cancel()
		}
		got, by := p.horizon(ctx, limit)
		if !got.Equal(tt.want) {
			t.Errorf("%s: horizon %v after the start, want %v", tt.name, got.Sub(now), tt.want.Sub(now))
		}
		if by != tt.by {
			t.Errorf("%s: set by %q, want %q", tt.name, by, tt.by)
		}
	}
}

// TestPollEndsWhenEveryWaiterLeaves: once every scrape has hung up, the
// poll's calls end and no other starts.
func TestPollEndsWhenEveryWaiterLeaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(10, "root", time.Hour, "projects", time.Hour, "locations", time.Hour, "location_detail", time.Hour)
		p := NewPoller(&Target{Client: f, DetailIDs: []int64{1, 2, 3, 4, 5}}, PollerOptions{Timeout: time.Minute})
		var cancels []context.CancelFunc
		var wg sync.WaitGroup
		for range 2 {
			ctx, cancel := context.WithCancel(context.Background())
			cancels = append(cancels, cancel)
			wg.Go(func() { p.Poll(ctx) })
		}
		synctest.Wait()
		for _, cancel := range cancels {
			cancel()
		}
		wg.Wait()
		synctest.Wait()
		if lists, details := f.asked(); len(lists) != 3 || len(details) != 1 || f.inFlight != 0 {
			t.Errorf("asked %v and details %v, %d still in flight: want the lists and the one view that had a slot, all ended", lists, details, f.inFlight)
		}
	})
}

// TestPollsKeptForTheInterval: inside the minimum interval a scrape is
// answered from the last poll that its scrapes did not abandon.
func TestPollsKeptForTheInterval(t *testing.T) {
	for _, tt := range []struct {
		name   string
		budget time.Duration // of the first scrape; 0 hangs up after 1 s
		polls  int
	}{
		{"a poll that ended on its own", time.Minute, 1},
		{"a poll its deadline cut", 3 * time.Second, 1},
		{"a poll its scrape abandoned", 0, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFake(5, "location_detail/2", 10*time.Second)
				p := NewPoller(&Target{Client: f, DetailIDs: []int64{1, 2}}, PollerOptions{Timeout: time.Minute, MinInterval: time.Hour})
				ctx, cancel := context.WithTimeout(context.Background(), tt.budget)
				if tt.budget == 0 {
					ctx, cancel = context.WithCancel(context.Background())
					time.AfterFunc(time.Second, cancel)
				}
				p.Poll(ctx)
				cancel()
				synctest.Wait()
				ctx, cancel = context.WithTimeout(context.Background(), cmp.Or(tt.budget, time.Minute))
				defer cancel()
				p.Poll(ctx)
				if lists, _ := f.asked(); len(lists) != 3*tt.polls {
					t.Errorf("asked %v, want %d polls", lists, tt.polls)
				}
			})
		})
	}
}

// TestLocationDetailStatus checks location_detail's status code: the
// highest status among the failed detail views, 0 when none of them got a
// response, 200 when none failed, whatever order the answers came in.
func TestLocationDetailStatus(t *testing.T) {
	for _, tt := range []struct {
		name   string
		status map[int64]int
		order  []int64 // the order the views answer in; an id left out never answers
		up     bool
		want   int
	}{
		{"all well", nil, []int64{1, 2, 3}, true, 200},
		{"refused, then fine", map[int64]int{1: 403}, []int64{1, 2, 3}, false, 403},
		{"not found last", map[int64]int{3: 404}, []int64{1, 2, 3}, false, 404},
		{"the highest of the failed", map[int64]int{1: 500, 2: 404}, []int64{1, 3, 2}, false, 500},
		{"a failure with a response beats one without", map[int64]int{1: 401}, []int64{1, 3}, false, 401},
		{"no response among the failed", nil, []int64{2, 3}, false, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFake(10, "location_detail", time.Hour)
				for i, id := range tt.order {
					f.delay[fmt.Sprint("location_detail/", id)] = time.Duration(i+1) * time.Millisecond
				}
				for id, status := range tt.status {
					f.status[fmt.Sprint("location_detail/", id)] = status
				}
				p := NewPoller(&Target{Client: f, DetailIDs: []int64{1, 2, 3}}, PollerOptions{Timeout: 10 * time.Second})
				st := p.Poll(context.Background()).Endpoints[client.EndpointLocationDetail]
				if (st.Err == nil) != tt.up || st.Status != tt.want {
					t.Errorf("location_detail up %v with %d, want %v with %d", (st.Err == nil), st.Status, tt.up, tt.want)
				}
			})
		})
	}
}

// TestLocationDetailWhileViewsAreOut: a scrape that answers while a detail
// view is still out reports no failure for it, and its location, never
// checked, has no series; location_detail sums up the views that answered.
func TestLocationDetailWhileViewsAreOut(t *testing.T) {
	for _, tt := range []struct {
		name   string
		status int
		want   int
	}{
		{"the other answered well", 0, 200},
		{"the other was refused", 403, 403},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFake(10, "location_detail/2", time.Hour)
				f.status["location_detail/1"] = tt.status
				p := NewPoller(&Target{Client: f, DetailIDs: []int64{1, 2}}, PollerOptions{Timeout: time.Minute})
				ctx, cancel := context.WithCancel(context.Background())
				time.AfterFunc(time.Second, cancel)
				s := p.Poll(ctx)
				st := s.Endpoints[client.EndpointLocationDetail]
				if (st.Err == nil) != (tt.status == 0) || st.Status != tt.want {
					t.Errorf("location_detail up %v with %d; want %v with %d", (st.Err == nil), st.Status, tt.status == 0, tt.want)
				}
				if got := ids(s.Details); !slices.Equal(got, []int64{1}) {
					t.Errorf("details of %v, want location 1 alone", got)
				}
			})
		})
	}
}

// TestDetailSubsetInTurns: a subset larger than a poll can check is checked
// in turns, never-checked locations first, then those checked longest ago;
// a location not reached keeps its last result, and none is down for want of time.
func TestDetailSubsetInTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(10, "location_detail", time.Second)
		f.concurrency = 1
		p := NewPoller(&Target{Client: f, DetailIDs: []int64{1, 2, 3, 4, 5, 6}}, PollerOptions{Timeout: time.Minute})
		for i, want := range [][]int64{{1, 2}, {3, 4}, {5, 6}, {1, 2}, {3, 4}} {
			_, before := f.asked()
			s := (<-scrapeAt(p, 2500*time.Millisecond)).Snapshot
			_, after := f.asked()
			if got := after[len(before):]; !slices.Equal(got, want) {
				t.Errorf("poll %d checked %v, want %v", i, got, want)
			}
			if got, want := ids(s.Details), []int64{1, 2, 3, 4, 5, 6}[:min(2*i+2, 6)]; !slices.Equal(got, want) {
				t.Errorf("poll %d reports locations %v, want %v", i, got, want)
			}
			for _, d := range s.Details {
				if d.Err != nil {
					t.Errorf("poll %d: location %d down: %v", i, d.ID, d.Err)
				}
			}
		}
	})
}

// TestCutViews: a view that the poll's end cuts after the time views
// usually take is slow on its own, a timeout; one cut sooner tells nothing
// of its location. Views that usually take long are still tried.
func TestCutViews(t *testing.T) {
	for _, tt := range []struct {
		name        string
		ids         []int64
		usual       time.Duration // of every view in the first poll
		firstBudget time.Duration
		delay       map[string]time.Duration // of the views in the second
		late        bool                     // a scrape with more time joins the second, then hangs up
		down, fresh []int64                  // locations down and checked in the second poll's answer
	}{
		{"slow on its own", []int64{1, 2, 3}, time.Second, time.Minute,
			map[string]time.Duration{"location_detail": time.Second, "location_detail/3": 10 * time.Second}, false, []int64{3}, []int64{1, 2, 3}},
		{"cut sooner than usual", []int64{1, 2, 3, 4, 5, 6, 7, 8}, 2 * time.Second, time.Minute,
			map[string]time.Duration{"location_detail": 2 * time.Second}, true, nil, []int64{1, 2, 3, 4}},
		{"usually slower than half the poll", []int64{1, 2, 3}, time.Hour, 3 * time.Hour, nil, false, nil, []int64{1, 2, 3}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFake(10, "location_detail", tt.usual)
				f.concurrency = 1
				p := NewPoller(&Target{Client: f, DetailIDs: tt.ids}, PollerOptions{Timeout: 4 * time.Hour})
				<-scrapeAt(p, tt.firstBudget)
				f.mu.Lock()
				f.delay = tt.delay
				f.mu.Unlock()
				answer := scrapeAt(p, 10*time.Second)
				if tt.late {
					time.Sleep(time.Second)
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					time.AfterFunc(4*time.Second, cancel)
					go p.Poll(ctx)
				}
				s := (<-answer).Snapshot
				var down, fresh []int64
				for _, d := range s.Details {
					if d.Err != nil {
						down = append(down, d.ID)
					}
				}
				for _, d := range s.checkedDetails() {
					fresh = append(fresh, d.ID)
				}
				if !slices.Equal(down, tt.down) || !slices.Equal(fresh, tt.fresh) {
					t.Errorf("locations down %v, checked %v; want %v and %v", down, fresh, tt.down, tt.fresh)
				}
			})
		})
	}
}

// TestCallOrder: root and the lists go first because they start first;
// explicit ids are asked for at once alongside them, ids of the list as their
// page arrives; no more calls are out than the concurrency, and under a rate
// limit the lists have their turns first.
func TestCallOrder(t *testing.T) {
	lists := []string{"root", "projects", "locations?page=1", "locations?page=2"}
	for _, tt := range []struct {
		name        string
		concurrency int
		rateLimited bool
		target      Target
		starts      map[string]time.Duration // when calls start
		most        int
	}{
		{"one slot", 1, false, Target{DetailIDs: []int64{1, 2, 3}}, map[string]time.Duration{"location_detail/1": 8 * time.Second}, 1},
		{"explicit ids at once", 8, false, Target{DetailIDs: []int64{1, 2, 3}}, map[string]time.Duration{"location_detail/1": 0, "location_detail/3": 0}, 6},
		{"ids as their page arrives", 4, false, Target{DetailLimit: 4}, map[string]time.Duration{"location_detail/1": time.Second, "location_detail/3": 2 * time.Second}, 4},
		{"two slots", 2, false, Target{DetailIDs: []int64{1, 2, 3}}, map[string]time.Duration{"locations?page=1": 3 * time.Second}, 2},
		{"a rate limit", 4, true, Target{DetailLimit: 4}, map[string]time.Duration{"location_detail/1": 3 * time.Second}, 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFake(4, "root", 3*time.Second, "projects", 3*time.Second, "locations", time.Second, "location_detail", time.Second)
				f.pageSize, f.concurrency, f.rateLimited = 2, tt.concurrency, tt.rateLimited
				tt.target.Client = f
				p := NewPoller(&tt.target, PollerOptions{Timeout: time.Minute})
				begin := time.Now()
				if s := p.Poll(context.Background()); !s.up() || len(s.checkedDetails()) != len(f.calls)-len(lists) {
					t.Errorf("up %v, %d details checked of %v", s.up(), len(s.checkedDetails()), f.calls)
				}
				for call, want := range tt.starts {
					if got := f.starts[call].Sub(begin).Round(time.Millisecond); got != want {
						t.Errorf("%s started after %v, want %v", call, got, want)
					}
				}
				if got := f.calls[:len(lists)]; tt.concurrency == 1 && !slices.Equal(got, lists) {
					t.Errorf("first calls %v, want the lists %v", got, lists)
				}
				if f.most != tt.most {
					t.Errorf("%d calls at most at once, want %d", f.most, tt.most)
				}
			})
		})
	}
}

// checked returns the ids p keeps a check of, and location id's last check time.
func checked(p *Poller, id int64) ([]int64, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Sorted(maps.Keys(p.checks)), p.checks[id].Checked
}

// TestSubsetFromTheList: the subset drawn from the list follows it once it
// is read whole, forgetting the locations that left; while it cannot be read
// whole, the last results stay, with those the list has given so far.
func TestSubsetFromTheList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(10)
		f.pageSize = 2
		p := NewPoller(&Target{Client: f, DetailLimit: 4}, PollerOptions{Timeout: time.Minute})
		for _, step := range []struct {
			name string
			set  func()
			want []int64
			kept []int64
		}{
			{"all well", func() {}, []int64{1, 2, 3, 4}, []int64{1, 2, 3, 4}},
			{"the list down", func() { f.status["locations"] = 500 }, []int64{1, 2, 3, 4}, []int64{1, 2, 3, 4}},
			{"its second page late", func() { f.status, f.locations, f.delay["locations?page=2"] = map[string]int{}, 6, time.Hour }, []int64{1, 2, 3, 4}, []int64{1, 2, 3, 4}},
			{"locations 3 and 4 gone", func() { f.locations, f.delay = 2, map[string]time.Duration{} }, []int64{1, 2}, []int64{1, 2}},
		} {
			f.mu.Lock()
			step.set()
			f.mu.Unlock()
			s := (<-scrapeAt(p, 10*time.Second)).Snapshot
			kept, _ := checked(p, 0)
			if got := ids(s.Details); !slices.Equal(got, step.want) || !slices.Equal(kept, step.kept) {
				t.Errorf("%s: details %v, checks kept of %v; want %v and %v", step.name, got, kept, step.want, step.kept)
			}
		}
	})
}

// TestPollCounters: one count per poll, however many scrapes share it;
// none for a scrape answered inside the minimum interval; a failed poll
// and a held-off scrape count as failures. Both start at 0.
func TestPollCounters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewTargetStats("", "")
		f := newFake(5, "root", time.Second)
		p := NewPoller(&Target{Client: f}, PollerOptions{Timeout: time.Minute, MinInterval: time.Hour, Polls: m})
		counts := func(polls, failures uint64) {
			t.Helper()
			if p, f := pollTotals(m); p != polls || f != failures {
				t.Errorf("polls %d, failures %d; want %d and %d", p, f, polls, failures)
			}
		}
		counts(0, 0)
		for range 3 {
			go p.Poll(context.Background())
		}
		synctest.Wait()
		time.Sleep(time.Second)
		synctest.Wait()
		counts(1, 0)
		p.Poll(context.Background()) // inside the minimum interval
		counts(1, 0)
		p.opts.MinInterval = 0
		f.status["projects"] = http.StatusTooManyRequests
		p.Poll(context.Background()) // meets the 429
		p.Poll(context.Background()) // held off: sends nothing
		counts(3, 2)
	})
}

// TestShortScrapesAddNoFailure: scrapes whose timeout header is below one
// second, against a service that answers in 50 ms, add no poll failure.
func TestShortScrapesAddNoFailure(t *testing.T) {
	for _, header := range []string{"0.000001", "0.05", "0.1", "0.3", "0.9"} {
		t.Run(header, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFake(10, "root", 50*time.Millisecond, "projects", 50*time.Millisecond, "locations", 50*time.Millisecond, "location_detail", 50*time.Millisecond)
				m := NewTargetStats("", "")
				p := NewPoller(&Target{Client: f, DetailLimit: 8}, PollerOptions{Timeout: 10 * time.Second, Polls: m})
				h := NewHandler(p, NewMetrics(nil), m, prometheus.NewRegistry(), 10*time.Second, nil)
				for range 5 {
					req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
					req.Header.Set(scrapeTimeoutHeader, header)
					h.ServeHTTP(httptest.NewRecorder(), req)
					synctest.Wait()
				}
				if _, failures := pollTotals(m); failures != 0 {
					t.Errorf("%d poll failures", failures)
				}
			})
		})
	}
}

// TestEarlyEndKeepsItsBudget: a poll that ended early because no view left
// could end by its deadline was cut by lack of time: inside the minimum
// interval, a scrape with more time polls again rather than reuse it.
func TestEarlyEndKeepsItsBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(20, string(client.EndpointLocationDetail), time.Second)
		f.concurrency = 1
		p := NewPoller(&Target{Client: f, DetailLimit: 20}, PollerOptions{Timeout: time.Minute, MinInterval: time.Hour})
		<-scrapeAt(p, 3*time.Second)
		s := (<-scrapeAt(p, 30*time.Second)).Snapshot
		if lists, _ := f.asked(); len(lists) != 6 || len(s.checkedDetails()) != 20 {
			t.Errorf("asked %v, %d views checked: want a second poll that checks all 20", lists, len(s.checkedDetails()))
		}
	})
}

// TestStoppedPollAddsNoFailure: a poll that a reload cancels adds no poll
// failure, even when one of its lists had already failed.
func TestStoppedPollAddsNoFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(5, "locations", time.Hour)
		f.status["root"] = http.StatusInternalServerError
		m := NewTargetStats("", "")
		p := NewPoller(&Target{Client: f}, PollerOptions{Timeout: time.Minute, Polls: m})
		answer := scrapeAt(p, 30*time.Second)
		time.Sleep(time.Second)
		p.stop()
		<-answer
		synctest.Wait()
		if polls, failures := pollTotals(m); polls != 0 || failures != 0 {
			t.Errorf("the stopped poll counted %d polls, %d failures; want none", polls, failures)
		}
	})
}

// TestDetailsTriedWhileTheirTimeIsUnknown: while no detail view has ever
// answered, a poll whose lists took more than half its budget still tries
// the subset, which fits in the time left.
func TestDetailsTriedWhileTheirTimeIsUnknown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(5, "locations", 6*time.Second, "location_detail", 100*time.Millisecond)
		f.concurrency = 1
		p := NewPoller(&Target{Client: f, DetailIDs: []int64{1, 2, 3}}, PollerOptions{Timeout: time.Minute})
		for i := range 2 {
			s := (<-scrapeAt(p, 10*time.Second)).Snapshot
			if got := len(s.checkedDetails()); got != 3 || s.Endpoints[client.EndpointLocationDetail].Err != nil {
				t.Errorf("poll %d: %d detail views checked, location_detail %+v; want all 3, up", i, got, s.Endpoints[client.EndpointLocationDetail])
			}
		}
	})
}

// shiftingList names new ids on each walk, then fails the walk.
type shiftingList struct {
	*fakeService
	walks int64
}

func (s *shiftingList) Locations(_ context.Context, _ int, onIDs func([]int64)) client.ListResult {
	s.walks++
	onIDs([]int64{10*s.walks + 1, 10*s.walks + 2})
	return client.ListResult{Result: client.Result{Status: http.StatusInternalServerError, Err: &client.Error{Endpoint: client.EndpointLocations, Reason: client.ReasonHTTPStatus, Status: http.StatusInternalServerError, Err: errors.New("page 2 refused")}}}
}

// TestFailingListKeepsTheSubsetBounded: a list that names other ids on each
// walk and never ends well cannot grow the subset past its limit.
func TestFailingListKeepsTheSubsetBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &shiftingList{fakeService: newFake(0)}
		p := NewPoller(&Target{Client: s, DetailLimit: 2}, PollerOptions{Timeout: time.Minute})
		for i := range 10 {
			snap := (<-scrapeAt(p, 10*time.Second)).Snapshot
			kept, _ := checked(p, 0)
			if len(snap.Details) > 2 || len(kept) > 2 {
				t.Fatalf("poll %d: details of %v, checks kept of %v; want at most 2", i, ids(snap.Details), kept)
			}
		}
	})
}

func (s *Snapshot) checkedDetails() []locationState {
	return slices.DeleteFunc(slices.Clone(s.Details), func(d locationState) bool { return d.Checked.Before(s.Start) })
}
