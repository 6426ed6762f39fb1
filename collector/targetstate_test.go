package collector

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 22, 7, 0, 0, 0, time.UTC)

func rec(target, module string, minute int, state PollState, summary string) *PollRecord {
	return &PollRecord{Target: target, Module: module, Start: t0.Add(time.Duration(minute) * time.Minute), State: state, Summary: summary}
}

func TestTargetsFailingSince(t *testing.T) {
	l := NewPollLog(100)
	const svc = "https://deploy.example.com"
	steps := []struct {
		rec          *PollRecord
		wantSince    int // minute of the first failing poll, -1 for none
		wantID       uint64
		wantSummary  string
		wantState    PollState
		wantProjects Count
	}{
		{rec(svc, "", 0, PollOK, "ok"), -1, 0, "", PollOK, Count{5, true}},
		{rec(svc, "", 1, PollPartial, "partial: location_detail (1 of 5) http_status 404"), 1, 2, "partial: location_detail (1 of 5) http_status 404", PollPartial, Count{5, true}},
		// The streak goes on, whatever its later polls say: it started at
		// the first one, for the reason that poll gave.
		{rec(svc, "", 2, PollFailed, "failed: root, projects, locations http_status 401"), 1, 2, "partial: location_detail (1 of 5) http_status 404", PollFailed, Count{}},
		{rec(svc, "", 3, PollOK, "ok"), -1, 0, "", PollOK, Count{5, true}},
		{rec(svc, "", 4, PollFailed, "failed: root, projects, locations network"), 4, 5, "failed: root, projects, locations network", PollFailed, Count{}},
	}
	for i, s := range steps {
		if s.wantState != PollFailed {
			s.rec.Projects = Count{5, true}
		}
		l.Add(s.rec)
		got := l.Targets()
		if len(got) != 1 {
			t.Fatalf("step %d: %d targets, want 1", i, len(got))
		}
		st := got[0]
		wantSince := time.Time{}
		if s.wantSince >= 0 {
			wantSince = t0.Add(time.Duration(s.wantSince) * time.Minute)
		}
		if !st.FailingSince.Equal(wantSince) || st.FailingID != s.wantID || st.FailingSummary != s.wantSummary {
			t.Errorf("step %d: failing since %v (poll %d, %q), want %v (poll %d, %q)", i, st.FailingSince, st.FailingID, st.FailingSummary, wantSince, s.wantID, s.wantSummary)
		}
		if st.State != s.wantState || st.LastID != uint64(i+1) || !st.LastStart.Equal(s.rec.Start) || st.Summary != s.rec.Summary || st.Projects != s.wantProjects {
			t.Errorf("step %d: last poll %+v", i, st)
		}
	}
}

func TestTargetsHoldOff(t *testing.T) {
	l := NewPollLog(100)
	until := t0.Add(10 * time.Minute)
	started := rec("t", "", 0, PollFailed, "failed: root, projects, locations http_status 429")
	started.HeldOffUntil = until
	l.Add(started)
	held := rec("t", "", 1, PollFailed, "failed: root, projects, locations held off 429")
	held.HeldOff = true
	l.Add(held)
	if st := l.Targets()[0]; !st.HeldOff || !st.HeldOffUntil.Equal(until) {
		t.Errorf("during the hold-off: held off %v until %v, want until %v", st.HeldOff, st.HeldOffUntil, until)
	}
	l.Add(rec("t", "", 11, PollOK, "ok"))
	if st := l.Targets()[0]; st.HeldOff || !st.HeldOffUntil.IsZero() {
		t.Errorf("after the hold-off: held off %v until %v", st.HeldOff, st.HeldOffUntil)
	}
}

func TestTargetsOrderAndPagesKept(t *testing.T) {
	l := NewPollLog(2)
	l.Add(rec("https://b.example.com", "default", 0, PollFailed, "failed"))
	l.Add(rec("https://a.example.com", "default", 1, PollOK, "ok"))
	l.Add(rec("https://z.example.com", "", 2, PollOK, "ok"))
	l.Add(rec("https://a.example.com", "another", 3, PollOK, "ok"))
	var got []string
	for _, st := range l.Targets() {
		got = append(got, fmt.Sprintf("%s|%s|%v|%v", st.Target, st.Module, st.LastKept, st.FailingKept))
	}
	want := []string{
		// The /metrics service first, then the /probe targets by URL and module.
		"https://z.example.com||true|false",
		"https://a.example.com|another|true|false",
		"https://a.example.com|default|false|false",
		"https://b.example.com|default|false|false",
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("targets\n%v\nwant\n%v", got, want)
	}
	l = NewPollLog(5)
	l.Add(rec("t", "", 0, PollFailed, "failed"))
	l.Add(rec("t", "", 1, PollFailed, "failed"))
	if st := l.Targets()[0]; !st.FailingKept || st.FailingID != 1 {
		t.Errorf("the first failing poll is kept, but the state says %+v", st)
	}
}

func TestTargetsAreBounded(t *testing.T) {
	if maxTargets != maxProbeTargets+1 {
		t.Errorf("the targets table keeps %d targets, want the /probe cache's %d plus /metrics", maxTargets, maxProbeTargets)
	}
	l := NewPollLog(10)
	l.maxTargets = 3
	l.Add(rec("metrics", "", 0, PollOK, "ok"))
	l.Add(rec("a", "m", 1, PollOK, "ok"))
	l.Add(rec("b", "m", 2, PollOK, "ok"))
	l.Add(rec("metrics", "", 3, PollOK, "ok"))
	l.Add(rec("c", "m", 4, PollOK, "ok")) // a was polled least recently: it goes
	var got []string
	for _, st := range l.Targets() {
		got = append(got, st.Target)
	}
	if strings.Join(got, " ") != "metrics b c" {
		t.Errorf("targets %v, want the three polled most recently", got)
	}
}
