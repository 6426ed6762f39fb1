package collector

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/deployment-service/deployment_service_exporter/client"
)

var t0 = time.Date(2026, 11, 22, 7, 0, 0, 0, time.UTC)

func rec(target, module string, minute int, state PollState, summary string) *PollRecord {
	return &PollRecord{Target: target, Module: module, Start: t0.Add(time.Duration(minute) * time.Minute), State: state, Summary: summary}
}

// keptIDs renders the polls kept of a target as "latest/failing/holdoff".
func keptIDs(st TargetState) string {
	id := func(r *PollRecord) string {
		if r == nil {
			return "-"
		}
		return fmt.Sprint(r.ID)
	}
	return id(st.Latest) + "/" + id(st.Failing) + "/" + id(st.HoldOff)
}

func TestTargetKeepsItsFirstFailingPoll(t *testing.T) {
	l := NewPollLog(100)
	const svc = "https://deploy.example.com"
	for i, s := range []struct {
		state PollState
		want  string
	}{
		{PollOK, "1/-/-"},
		{PollPartial, "2/2/-"},
		// The run goes on, whatever its later polls say: it started at
		// the first one, for the reason that poll gave.
		{PollFailed, "3/2/-"},
		{PollSlow, "4/-/-"},
		{PollFailed, "5/5/-"},
		{PollOK, "6/-/-"},
	} {
		l.Add(rec(svc, "", i, s.state, s.state.String()))
		st, ok := l.Target(svc, "")
		if !ok || keptIDs(st) != s.want {
			t.Errorf("poll %d (%v): kept %s, want %s", i+1, s.state, keptIDs(st), s.want)
		}
	}
}

// TestEvidenceOutlivesOtherTargetsPolls: a failing target keeps its first
// failing poll and the poll that met a 429, however many polls of other
// targets come meanwhile.
func TestEvidenceOutlivesOtherTargetsPolls(t *testing.T) {
	l := NewPollLog(DefaultRecentPolls)
	until := t0.Add(time.Hour)
	l.Add(rec("svc", "", 0, PollFailed, "failed: root, projects, locations http_status 500"))
	met := rec("svc", "", 1, PollFailed, "failed: root http_status 429, projects, locations held off 429")
	met.Requests = []client.TraceRequest{{Endpoint: client.EndpointRoot, Status: 429, RetryAfter: "3600", HoldOffUntil: until}}
	met.HeldOff, met.HoldOffStatus, met.HeldOffUntil = true, 429, until
	l.Add(met)
	for i := range 1000 {
		l.Add(rec(fmt.Sprint("https://other", i%5, ".example.com"), "default", 2, PollOK, "ok"))
	}
	held := rec("svc", "", 3, PollFailed, "failed: root, projects, locations held off 429")
	held.HeldOff, held.HoldOffStatus, held.HeldOffUntil = true, 429, until
	l.Add(held)
	for _, id := range []uint64{1, 2} {
		if _, ok := l.Get(id); !ok {
			t.Errorf("poll %d is gone after 1,000 polls of other targets", id)
		}
	}
	if r, ok := l.Get(held.ID); !ok || r.HoldOffPollID != 2 {
		t.Errorf("the held-off poll names poll %v as the one that met the 429, want 2", r)
	}
	if st, _ := l.Target("svc", ""); keptIDs(st) != "1003/1/2" {
		t.Errorf("svc keeps %s, want 1003/1/2", keptIDs(st))
	}
	// Polls of other targets that are no longer their latest go.
	if _, ok := l.Get(3); ok {
		t.Error("an old poll of a target that is up is still kept")
	}
	l.Add(rec("svc", "", 4, PollOK, "ok"))
	if st, _ := l.Target("svc", ""); keptIDs(st) != "1004/-/-" {
		t.Errorf("after recovery svc keeps %s, want its latest poll alone", keptIDs(st))
	}
}

// TestHoldOffPollOfTheTarget: a poll held off names the poll of its target
// that met the answer, even when that one was recorded later; a later
// answer with an earlier end does not take its place.
func TestHoldOffPollOfTheTarget(t *testing.T) {
	until := t0.Add(14 * time.Second)
	heldRec := func(target string) *PollRecord {
		r := rec(target, "", 0, PollFailed, "failed: root, projects, locations held off 429")
		r.HeldOff, r.HoldOffStatus, r.HeldOffUntil = true, 429, until
		return r
	}
	met := func(target string, until time.Time) *PollRecord {
		r := rec(target, "", 0, PollFailed, "failed: root http_status 429")
		r.Requests = []client.TraceRequest{{Status: 200}, {Status: 429, RetryAfter: "14", HoldOffUntil: until}}
		return r
	}
	l := NewPollLog(10)
	l.Add(heldRec("svc"))                       // 1: recorded before the poll that met the 429
	l.Add(met("other", until.Add(time.Second))) // 2
	l.Add(met("svc", until))                    // 3
	l.Add(met("svc", until.Add(-time.Second)))  // 4
	if r, ok := l.Get(1); !ok || r.HoldOffPollID != 3 || !r.HeldOff || len(r.Requests) > 0 {
		t.Errorf("held-off poll %+v links to poll %d, want 3", r, r.HoldOffPollID)
	}
	if kept, _ := l.Get(1); kept == nil || kept.HoldOffPollID != 3 {
		t.Error("the held-off poll is not kept with its link")
	}
	var b strings.Builder
	r, _ := l.Get(1)
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if want := "Sent nothing: the service asked to hold off (status 429) until 2026-11-22T07:00:14Z; poll 3 met that answer.\n"; !strings.Contains(b.String(), want) {
		t.Errorf("text view lacks %q:\n%s", want, b.String())
	}
	if st, _ := l.Target("svc", ""); keptIDs(st) != "4/1/3" {
		t.Errorf("svc keeps %s, want 4/1/3", keptIDs(st))
	}
	// Another target of the same origin, held off by that answer, shows
	// the poll of svc that met it.
	l.Add(heldRec("svc-other-module")) // 5
	if st, _ := l.Target("svc-other-module", ""); keptIDs(st) != "5/5/3" || st.Latest.HoldOffPollID != 3 {
		t.Errorf("a target held off by another's answer keeps %s, links to %d; want 5/5/3, 3", keptIDs(st), st.Latest.HoldOffPollID)
	}
}

func TestTargetsOrderAndRecentPolls(t *testing.T) {
	l := NewPollLog(3)
	l.Add(rec("https://b.example.com", "default", 0, PollFailed, "failed"))
	l.Add(rec("https://a.example.com", "default", 1, PollOK, "ok"))
	l.Add(rec("https://z.example.com", "", 2, PollOK, "ok"))
	l.Add(rec("https://a.example.com", "another", 3, PollOK, "ok"))
	l.Add(rec("https://a.example.com", "another", 4, PollOK, "ok"))
	var got []string
	for _, st := range l.Targets() {
		got = append(got, st.Latest.Target+"|"+st.Latest.Module)
	}
	// The /metrics service first, then the /probe targets by URL and module.
	if want := "https://z.example.com| https://a.example.com|another https://a.example.com|default https://b.example.com|default"; strings.Join(got, " ") != want {
		t.Errorf("targets\n%v\nwant\n%v", got, want)
	}
	got = nil
	for _, r := range l.Recent() {
		got = append(got, fmt.Sprint(r.ID))
	}
	if strings.Join(got, " ") != "5 3 2" {
		t.Errorf("recent polls %v, want the latest of the three targets polled last, newest first", got)
	}
}

func TestTargetsAreBounded(t *testing.T) {
	if maxTargets != maxProbeTargets+1 {
		t.Errorf("the log keeps %d targets, want the /probe cache's %d plus /metrics", maxTargets, maxProbeTargets)
	}
	l := NewPollLog(10)
	l.Add(rec("metrics", "", 0, PollOK, "ok"))
	l.Add(rec("a", "m", 1, PollOK, "ok"))
	l.Add(rec("b", "m", 2, PollOK, "ok"))
	for i := range maxTargets - 3 {
		l.Add(rec(fmt.Sprint("filler", i), "m", 2, PollOK, "ok"))
	}
	l.Add(rec("metrics", "", 3, PollOK, "ok"))
	l.Add(rec("c", "m", 4, PollOK, "ok")) // a was polled least recently: it goes
	if n := len(l.Targets()); n != maxTargets {
		t.Errorf("%d targets kept, want %d", n, maxTargets)
	}
	for target, want := range map[string]bool{"a": false, "b": true, "c": true} {
		if _, ok := l.Target(target, "m"); ok != want {
			t.Errorf("target %s kept %v, want %v", target, ok, want)
		}
	}
	if _, ok := l.Target("metrics", ""); !ok {
		t.Error("the service behind /metrics, polled lately, was dropped")
	}
}

// TestPollsKeptAreBoundedInBytes: targets whose polls keep the most the
// trace allows go, least recently polled first, once all together pass
// maxKeptBytes; the target just polled stays.
func TestPollsKeptAreBoundedInBytes(t *testing.T) {
	long := strings.Repeat("x", 2<<10)
	reqs := make([]client.TraceRequest, 500)
	for i := range reqs {
		reqs[i] = client.TraceRequest{URL: long[:256], Error: long[:256]}
	}
	l := NewPollLog(10)
	n := 0
	for ; n < 1000 && len(l.Targets()) == n; n++ {
		for minute := range 3 {
			r := rec(fmt.Sprint("t", n), "m", minute, PollFailed, "failed")
			r.Requests = reqs
			l.Add(r)
		}
	}
	size := (&PollRecord{Requests: reqs}).bytes()
	if size < 300<<10 || l.bytes > maxKeptBytes {
		t.Fatalf("a poll counts %d bytes; the log keeps %d, more than %d", size, l.bytes, maxKeptBytes)
	}
	if kept := len(l.Targets()); kept >= n || kept < maxKeptBytes/(3*size)-1 {
		t.Errorf("%d targets kept of %d, want as many as %d bytes hold", kept, n, maxKeptBytes)
	}
	if _, ok := l.Target(fmt.Sprint("t", n-1), "m"); !ok {
		t.Error("the target polled last was dropped")
	}
	if _, ok := l.Target("t0", "m"); ok {
		t.Error("the target polled first is still kept")
	}
}

func TestTargetPage(t *testing.T) {
	ext, _ := url.Parse("https://exporter.example.com/deploy/")
	for _, tc := range []struct{ module, want string }{
		{"", "https://exporter.example.com/deploy/target?target=https%3A%2F%2Fdeploy.example.com%2Fapi"},
		{"default", "https://exporter.example.com/deploy/target?module=default&target=https%3A%2F%2Fdeploy.example.com%2Fapi"},
	} {
		if got := TargetPage(ext, "https://deploy.example.com/api", tc.module); got != tc.want {
			t.Errorf("module %q: page %s, want %s", tc.module, got, tc.want)
		}
	}
	if got := TargetPage(nil, "https://deploy.example.com", ""); got != "" {
		t.Errorf("page %q without an external URL", got)
	}
}
