package collector

import (
	"cmp"
	"slices"
	"time"
)

// maxTargets bounds the targets that the recent-polls log keeps the state
// of: as many as the /probe cache holds, plus the service behind /metrics.
// Targets come from requests, so the least recently polled one goes first,
// and a target dropped from the /probe cache leaves in its turn.
const maxTargets = maxProbeTargets + 1

// TargetState is the state at a glance of one watched service: the one
// behind /metrics (Module empty) or a /probe target with its module. It is
// a copy, safe to read without a lock.
type TargetState struct {
	Target string
	Module string
	// LastID, LastStart, State, Summary and the counts come from the
	// latest poll; LastKept tells whether its page is still kept.
	LastID    uint64
	LastStart time.Time
	LastKept  bool
	State     PollState
	Summary   string
	// Projects and Locations are the counts of the latest poll, unknown
	// when it could not read the lists.
	Projects, Locations Count
	// FailingSince is the start of the first poll of the current run of
	// polls that were not ok, zero while the latest poll is ok; FailingID
	// and FailingSummary are that poll's, FailingKept whether its page is
	// still kept.
	FailingSince   time.Time
	FailingID      uint64
	FailingSummary string
	FailingKept    bool
	// HeldOff tells whether the latest poll sent nothing because of a
	// hold-off. HeldOffUntil is the end of the last hold-off a poll
	// started, kept until a poll sends requests again; zero when unknown.
	HeldOff      bool
	HeldOffUntil time.Time
}

type targetKey struct{ target, module string }

// updateTarget folds rec into the state of its target; l.mu is held.
func (l *PollLog) updateTarget(rec *PollRecord) {
	key := targetKey{rec.Target, rec.Module}
	st, ok := l.targets[key]
	if !ok {
		if len(l.targets) >= l.maxTargets {
			l.evictTarget()
		}
		st = &TargetState{Target: rec.Target, Module: rec.Module}
		l.targets[key] = st
	}
	st.LastID, st.LastStart, st.State, st.Summary = rec.ID, rec.Start, rec.State, rec.Summary
	st.Projects, st.Locations = rec.Projects, rec.Locations
	switch {
	case rec.State == PollOK:
		st.FailingSince, st.FailingID, st.FailingSummary = time.Time{}, 0, ""
	case st.FailingID == 0:
		st.FailingSince, st.FailingID, st.FailingSummary = rec.Start, rec.ID, rec.Summary
	}
	st.HeldOff = rec.HeldOff
	switch {
	case !rec.HeldOffUntil.IsZero():
		st.HeldOffUntil = rec.HeldOffUntil
	case !rec.HeldOff:
		// This poll sent requests, so no earlier hold-off is in force.
		st.HeldOffUntil = time.Time{}
	}
}

// evictTarget drops the least recently polled target; l.mu is held.
func (l *PollLog) evictTarget() {
	var oldest targetKey
	oldestID := uint64(0)
	for k, st := range l.targets {
		if oldestID == 0 || st.LastID < oldestID {
			oldest, oldestID = k, st.LastID
		}
	}
	delete(l.targets, oldest)
}

// kept tells whether the poll with the given id is still in the ring; l.mu
// is held. Ids are given in sequence, so the ring holds the last ones.
func (l *PollLog) kept(id uint64) bool {
	return id > 0 && id <= l.seq && l.seq-id < uint64(len(l.ring))
}

// Targets returns the state of every target polled lately: the service
// behind /metrics first, then the /probe targets by URL and module.
func (l *PollLog) Targets() []TargetState {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]TargetState, 0, len(l.targets))
	for _, st := range l.targets {
		c := *st
		c.LastKept, c.FailingKept = l.kept(c.LastID), l.kept(c.FailingID)
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b TargetState) int {
		return cmp.Or(
			compareBool(a.Module != "", b.Module != ""),
			cmp.Compare(a.Target, b.Target),
			cmp.Compare(a.Module, b.Module),
		)
	})
	return out
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}
