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

func rec(target, module string, minute int, state, summary string) *PollRecord {
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
	l := NewPollLog()
	const svc = "https://deploy.example.com"
	for i, s := range []struct {
		state string
		want  string
	}{
		{"ok", "1/-/-"},
		{"partial", "2/2/-"},
		// The run goes on, whatever its later polls say: it started at
		// the first one, for the reason that poll gave.
		{"failed", "3/2/-"},
		{"slow", "4/-/-"},
		{"failed", "5/5/-"},
		{"ok", "6/-/-"},
	} {
		l.Add(rec(svc, "", i, s.state, s.state))
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
	l := NewPollLog()
	until := t0.Add(time.Hour)
	l.Add(rec("svc", "", 0, "failed", "failed: root, projects, locations http_status 500"))
	met := rec("svc", "", 1, "failed", "failed: root http_status 429")
	met.metUntil, met.HeldOffUntil, met.heldStatus, met.Rows = until, until, 429, []Row{{"failed", "root"}}
	l.Add(met)
	for i := range 1000 {
		l.Add(rec(fmt.Sprint("https://other", i%5, ".example.com"), "default", 2, "ok", "ok"))
	}
	held := rec("svc", "", 3, "failed", "sent nothing")
	held.HeldOffUntil, held.heldStatus = until, 429
	l.Add(held)
	for _, id := range []uint64{1, 2} {
		if _, ok := l.Get(id); !ok {
			t.Errorf("poll %d is gone after 1,000 polls of other targets", id)
		}
	}
	if r, ok := l.Get(held.ID); !ok || r.HoldOffPoll != 2 {
		t.Errorf("the held-off poll names poll %v as the one that met the 429, want 2", r)
	}
	if st, _ := l.Target("svc", ""); keptIDs(st) != "1003/1/2" {
		t.Errorf("svc keeps %s, want 1003/1/2", keptIDs(st))
	}
	// Polls of other targets that are no longer their latest go.
	if _, ok := l.Get(3); ok {
		t.Error("an old poll of a target that is up is still kept")
	}
	l.Add(rec("svc", "", 4, "ok", "ok"))
	if st, _ := l.Target("svc", ""); keptIDs(st) != "1004/-/-" {
		t.Errorf("after recovery svc keeps %s, want its latest poll alone", keptIDs(st))
	}
}

// TestTargetsOrder: the failing targets first, on a phone as on a wide
// screen; then the /metrics service, then the /probe targets by URL and module.
func TestTargetsOrder(t *testing.T) {
	l := NewPollLog()
	l.Add(rec("https://b.example.com", "default", 0, "failed", "failed"))
	l.Add(rec("https://a.example.com", "default", 1, "ok", "ok"))
	l.Add(rec("https://z.example.com", "", 2, "ok", "ok"))
	l.Add(rec("https://a.example.com", "another", 3, "partial", "partial"))
	l.Add(rec("https://c.example.com", "default", 4, "slow", "slow"))
	var got []string
	for _, st := range l.Targets() {
		got = append(got, st.Latest.Target+"|"+st.Latest.Module)
	}
	if want := "https://b.example.com|default https://a.example.com|another https://c.example.com|default https://z.example.com| https://a.example.com|default"; strings.Join(got, " ") != want {
		t.Errorf("targets\n%v\nwant\n%v", got, want)
	}
}

func TestTargetsAreBounded(t *testing.T) {
	if maxTargets != maxProbeTargets+1 {
		t.Errorf("the log keeps %d targets, want the /probe cache's %d plus /metrics", maxTargets, maxProbeTargets)
	}
	l := NewPollLog()
	l.Add(rec("metrics", "", 0, "ok", "ok"))
	l.Add(rec("a", "m", 1, "ok", "ok"))
	l.Add(rec("b", "m", 2, "ok", "ok"))
	for i := range maxTargets - 3 {
		l.Add(rec(fmt.Sprint("filler", i), "m", 2, "ok", "ok"))
	}
	l.Add(rec("metrics", "", 3, "ok", "ok"))
	l.Add(rec("c", "m", 4, "ok", "ok")) // a was polled least recently: it goes
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
	reqs := make([]client.TraceRequest, 500)
	for i := range reqs {
		reqs[i] = client.TraceRequest{Endpoint: client.EndpointRoot, URL: strings.Repeat("u", 256), Reason: client.ReasonNetwork, Error: strings.Repeat("e", 256)}
	}
	l := NewPollLog()
	n := 0
	for ; n < 1000 && len(l.Targets()) == n; n++ {
		for minute := range 3 {
			s := snapshotOf(refused, refused, refused)
			s.Start = t0.Add(time.Duration(minute) * time.Minute)
			l.Add(makeRecord(fmt.Sprint("t", n), "m", s, reqs, 0))
		}
	}
	size := makeRecord("t", "m", snapshotOf(nil, nil, nil), reqs, 0).size
	if size < 250<<10 || l.bytes > maxKeptBytes {
		t.Fatalf("a poll counts %d bytes; the log keeps %d, more than %d", size, l.bytes, maxKeptBytes)
	}
	if kept := len(l.Targets()); kept >= n || kept < maxKeptBytes/(2*size)-1 {
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
