package collector

import (
	"context"
	"errors"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/deployment-service/deployment_service_exporter/client"
)

// TestSnapshotExposition checks the pure mapping from a snapshot to
// samples, durations included, without any HTTP.
func TestSnapshotExposition(t *testing.T) {
	start := time.Unix(1700000000, 500_000_000)
	fail := &client.Error{Endpoint: client.EndpointLocations, Reason: client.ReasonHTTPStatus, Status: 500, Err: errors.New("x")}
	s := &Snapshot{
		Start:    start,
		Duration: 1500 * time.Millisecond,
		Endpoints: map[client.Endpoint]client.Result{
			client.EndpointRoot:           {Status: 200, Duration: 100 * time.Millisecond},
			client.EndpointProjects:       {Status: 200, Duration: 250 * time.Millisecond},
			client.EndpointLocations:      {Status: 500, Duration: time.Second, Err: fail},
			client.EndpointLocationDetail: {Status: 404, Duration: 500 * time.Millisecond, Err: fail},
		},
		Projects:     Count{Value: 0, Known: true},
		HoldOffUntil: time.Unix(1700000060, 250_000_000),
		Details: []locationState{
			{ID: 3, DetailResult: client.DetailResult{Result: client.Result{Status: 200, Duration: 200 * time.Millisecond}, Fields: map[string]string{"name": "eu-west", "region": "eu"}}, Checked: start.Add(time.Second)},
			// Checked by an earlier poll: its series come from that check.
			{ID: 7, DetailResult: client.DetailResult{Result: client.Result{Status: 404, Duration: 300 * time.Millisecond, Err: fail}}, Checked: time.Unix(1699999970, 125_000_000)},
		},
	}
	stats := NewTargetStats("http://deploy.example", "")
	stats.ObservePoll(true)
	stats.ObservePoll(false)
	reg := prometheus.Gatherers{NewMetrics([]string{"name", "region", "tier"}).gatherer(s, stats)}
	want := `
# HELP deployment_service_endpoint_duration_seconds Wall time spent on the endpoint in this scrape, all pages together.
# TYPE deployment_service_endpoint_duration_seconds gauge
deployment_service_endpoint_duration_seconds{endpoint="location_detail"} 0.5
deployment_service_endpoint_duration_seconds{endpoint="locations"} 1
deployment_service_endpoint_duration_seconds{endpoint="projects"} 0.25
deployment_service_endpoint_duration_seconds{endpoint="root"} 0.1
# HELP deployment_service_endpoint_failure_info Why the endpoint was down in this scrape: the failure reason (or held_off, not_checked) and, for network failures and timeouts, their cause; always 1.
# TYPE deployment_service_endpoint_failure_info gauge
deployment_service_endpoint_failure_info{endpoint="location_detail",reason="http_status"} 1
deployment_service_endpoint_failure_info{endpoint="locations",reason="http_status"} 1
# HELP deployment_service_endpoint_status_code HTTP status of the endpoint's last response in this scrape; 0 when none came. For location_detail: when any detail view failed, the highest status among the failed ones (0 only when none of them got a response); else 200.
# TYPE deployment_service_endpoint_status_code gauge
deployment_service_endpoint_status_code{endpoint="location_detail"} 404
deployment_service_endpoint_status_code{endpoint="locations"} 500
deployment_service_endpoint_status_code{endpoint="projects"} 200
deployment_service_endpoint_status_code{endpoint="root"} 200
# HELP deployment_service_endpoint_up Whether the endpoint answered well in this scrape: 2xx and valid JSON of the expected shape on every page read.
# TYPE deployment_service_endpoint_up gauge
deployment_service_endpoint_up{endpoint="location_detail"} 0
deployment_service_endpoint_up{endpoint="locations"} 0
deployment_service_endpoint_up{endpoint="projects"} 1
deployment_service_endpoint_up{endpoint="root"} 1
# HELP deployment_service_hold_off_until_timestamp_seconds Unix time until which the exporter sends the service nothing because a 429 or 503 asked it to wait (Retry-After); 0 when no hold-off is in force.
# TYPE deployment_service_hold_off_until_timestamp_seconds gauge
deployment_service_hold_off_until_timestamp_seconds 1.70000006025e+09
# HELP deployment_service_location_detail_duration_seconds Time taken by the location's detail request at its last check.
# TYPE deployment_service_location_detail_duration_seconds gauge
deployment_service_location_detail_duration_seconds{location_id="3"} 0.2
deployment_service_location_detail_duration_seconds{location_id="7"} 0.3
# HELP deployment_service_location_info Selected fields of the location's detail view at its last check, as labels; always 1.
# TYPE deployment_service_location_info gauge
deployment_service_location_info{location_id="3",name="eu-west",region="eu"} 1
# HELP deployment_service_location_last_check_timestamp_seconds Unix time of the location's last check, which location_up, location_detail_duration_seconds and location_info come from.
# TYPE deployment_service_location_last_check_timestamp_seconds gauge
deployment_service_location_last_check_timestamp_seconds{location_id="3"} 1.7000000015e+09
deployment_service_location_last_check_timestamp_seconds{location_id="7"} 1.699999970125e+09
# HELP deployment_service_location_up Whether the location's detail view answered well at its last check.
# TYPE deployment_service_location_up gauge
deployment_service_location_up{location_id="3"} 1
deployment_service_location_up{location_id="7"} 0
# HELP deployment_service_poll_failures_total Polls after which deployment_service_up was 0, held-off ones included.
# TYPE deployment_service_poll_failures_total counter
deployment_service_poll_failures_total 1
# HELP deployment_service_poll_timestamp_seconds Unix time at which the poll behind this answer started.
# TYPE deployment_service_poll_timestamp_seconds gauge
deployment_service_poll_timestamp_seconds 1.7000000005e+09
# HELP deployment_service_polls_total Polls of the deployment service: one per poll, however many scrapes shared it, held-off ones included.
# TYPE deployment_service_polls_total counter
deployment_service_polls_total 2
# HELP deployment_service_projects Projects the key can access; absent when the list could not be read.
# TYPE deployment_service_projects gauge
deployment_service_projects 0
# HELP deployment_service_scrape_duration_seconds Wall time of the whole poll of the API.
# TYPE deployment_service_scrape_duration_seconds gauge
deployment_service_scrape_duration_seconds 1.5
# HELP deployment_service_target_info The deployment service this answer is about, named by its base URL (redacted: no user info, credential-like query values cut out), with the exporter's page about it if known; always 1.
# TYPE deployment_service_target_info gauge
deployment_service_target_info{url="http://deploy.example"} 1
# HELP deployment_service_up Whether the API root, project list and location list all answered well in this scrape (1) or not (0).
# TYPE deployment_service_up gauge
deployment_service_up 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

func TestUpNeedsAllThreeLists(t *testing.T) {
	ok := client.Result{Status: 200}
	bad := client.Result{Status: 500, Err: errors.New("x")}
	for name, eps := range map[string]map[client.Endpoint]client.Result{
		"all well":       {client.EndpointRoot: ok, client.EndpointProjects: ok, client.EndpointLocations: ok},
		"root missing":   {client.EndpointProjects: ok, client.EndpointLocations: ok},
		"projects fails": {client.EndpointRoot: ok, client.EndpointProjects: bad, client.EndpointLocations: ok},
		"details fail":   {client.EndpointRoot: ok, client.EndpointProjects: ok, client.EndpointLocations: ok, client.EndpointLocationDetail: bad},
	} {
		want := name == "all well" || name == "details fail"
		if got := (&Snapshot{Endpoints: eps}).up(); got != want {
			t.Errorf("%s: Up() = %v, want %v", name, got, want)
		}
	}
}

func TestRepeatedDetailIDsAreOneLocation(t *testing.T) {
	f := newFake(6)
	s := NewPoller(&Target{Client: f, DetailIDs: []int64{3, 5, 3, 1, 5}}, PollerOptions{}).Poll(context.Background())
	var got []int64
	for _, d := range s.Details {
		got = append(got, d.ID)
	}
	if !slices.Equal(got, []int64{1, 3, 5}) || len(f.calls) != 6 {
		t.Errorf("details of %v after the views %v, want each of 1, 3 and 5 once", got, f.calls)
	}
}

// TestHoldOffEndsInAReusedPoll serves a poll that met a hold-off after the
// hold-off ended, as --api.min-interval does: none is in force any more.
func TestHoldOffEndsInAReusedPoll(t *testing.T) {
	now := time.Now()
	p := NewPoller(&Target{Client: newFake(0)}, PollerOptions{MinInterval: time.Hour})
	s := &Snapshot{Start: now, HoldOffUntil: now.Add(time.Minute)}
	p.last = s
	if got := p.Poll(context.Background()); !got.HoldOffUntil.Equal(s.HoldOffUntil) {
		t.Errorf("hold-off until %v served inside it, want %v", got.HoldOffUntil, s.HoldOffUntil)
	}
	s.HoldOffUntil = now.Add(-time.Second)
	later := p.Poll(context.Background())
	if later == s || !later.HoldOffUntil.IsZero() {
		t.Errorf("hold-off until %v served after it ended", later.HoldOffUntil)
	}
	if s.HoldOffUntil.IsZero() {
		t.Error("the shared snapshot was changed")
	}
	reg := prometheus.Gatherers{NewMetrics(nil).gatherer(later, nil)}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`# HELP deployment_service_hold_off_until_timestamp_seconds Unix time until which the exporter sends the service nothing because a 429 or 503 asked it to wait (Retry-After); 0 when no hold-off is in force.
# TYPE deployment_service_hold_off_until_timestamp_seconds gauge
deployment_service_hold_off_until_timestamp_seconds 0
`), "deployment_service_hold_off_until_timestamp_seconds"); err != nil {
		t.Error(err)
	}
}

// TestReasonAndCause: the labels of endpoint_failure_info for each kind of
// error an endpoint can end a poll with.
func TestReasonAndCause(t *testing.T) {
	clientErr := func(r client.Reason, err error) error {
		return &client.Error{Endpoint: client.EndpointRoot, Reason: r, Err: err}
	}
	for _, tt := range []struct {
		name          string
		err           error
		reason, cause string
	}{
		{"status", clientErr(client.ReasonHTTPStatus, errors.New("x")), "http_status", ""},
		{"refused", clientErr(client.ReasonNetwork, syscall.ECONNREFUSED), "network", client.CauseConnectionRefused},
		{"network, other", clientErr(client.ReasonNetwork, errors.New("x")), "network", client.CauseOther},
		{"request timed out", clientErr(client.ReasonTimeout, context.DeadlineExceeded), "timeout", client.CauseTimeout},
		{"list cut by the deadline", clientErr(client.ReasonTimeout, errTooLate), "timeout", client.CauseTimeout},
		{"too large", clientErr(client.ReasonTooLarge, errors.New("x")), "too_large", ""},
		{"held off", &client.Error{Endpoint: client.EndpointRoot, Status: 429, Err: client.ErrHeldOff}, "held_off", ""},
		{"held off, whole poll", client.ErrHeldOff, "held_off", ""},
		{"no detail view checked", errNoDetail, "not_checked", ""},
		{"no key", &client.Error{Endpoint: client.EndpointRoot, Err: client.ErrKeyUnavailable}, "not_checked", ""},
		{"pair dropped", errDropped, "not_checked", ""},
	} {
		if reason, cause := reasonAndCause(tt.err); reason != tt.reason || cause != tt.cause {
			t.Errorf("%s: reason %q, cause %q; want %q, %q", tt.name, reason, cause, tt.reason, tt.cause)
		}
	}
}
