package collector

import (
	"errors"
	"time"

	"github.com/deployment-service/deployment_service_exporter/client"
)

// Snapshot is what one poll of the API found, as plain values. Turning it
// into metrics is a pure function of it, so "absent, never zero" is decided
// here and only here.
type Snapshot struct {
	// Start is when the poll began; Duration its wall time.
	Start    time.Time
	Duration time.Duration
	// Endpoints holds root, projects and locations, plus location_detail
	// when any detail view was requested.
	Endpoints map[client.Endpoint]endpointState
	// Projects and Locations are the list counts, when the lists were read.
	Projects, Locations Count
	// Details holds the last check of every location of the detail subset
	// checked so far, by this poll or an earlier one, sorted by id.
	Details []locationState
	// HoldOffUntil is when the hold-off in force as the snapshot was made
	// ends, the zero time when none was: the service answered 429 or 503
	// with Retry-After, and the exporter sends it nothing until then.
	HoldOffUntil time.Time

	trace *client.Trace
	// budget is the time the poll was given.
	budget time.Duration
}

// reusableFor tells whether a scrape with the given budget may be answered
// from this poll inside the minimum interval. A poll that ran out of time
// is not reused for a scrape that has more time than it had: one scrape
// with a tiny timeout must not blank the answers for the whole interval.
func (s *Snapshot) reusableFor(budget time.Duration) bool {
	return !s.timedOut() || s.budget >= budget-budget/20
}

// late tells whether err stands for a request that ran out of time.
func late(err error) bool {
	return errors.Is(err, errTooLate) || client.ReasonOf(err) == client.ReasonTimeout
}

// timedOut tells whether anything in the poll ran out of time.
func (s *Snapshot) timedOut() bool {
	for _, st := range s.Endpoints {
		if late(st.Err) {
			return true
		}
	}
	for _, d := range s.checkedDetails() {
		if late(d.Err) {
			return true
		}
	}
	return false
}

// onlyOutOfTime tells whether every list that failed in the poll, the
// root included, failed for lack of time.
func (s *Snapshot) onlyOutOfTime() bool {
	for _, ep := range upEndpoints {
		if st := s.Endpoints[ep]; st.Err != nil && !late(st.Err) {
			return false
		}
	}
	return true
}

// checkedDetails returns the detail views checked by this poll itself.
func (s *Snapshot) checkedDetails() []locationState {
	var out []locationState
	for _, d := range s.Details {
		if !d.Checked.Before(s.Start) {
			out = append(out, d)
		}
	}
	return out
}

// holdOffAt returns the end of c's hold-off when one is in force at now,
// else the zero time.
func holdOffAt(c *client.Client, now time.Time) time.Time {
	if until, _ := c.HoldOff(); now.Before(until) {
		return until
	}
	return time.Time{}
}

// at returns s as served at now: a hold-off that has ended since the poll
// is no longer in force. s itself is shared and never changed.
func (s *Snapshot) at(now time.Time) *Snapshot {
	if s.HoldOffUntil.IsZero() || now.Before(s.HoldOffUntil) {
		return s
	}
	c := *s
	c.HoldOffUntil = time.Time{}
	return &c
}

// endpointState is how one endpoint answered during a poll.
type endpointState struct {
	// Status is the HTTP status of the last response, 0 when none came.
	Status   int
	Duration time.Duration
	// Err is nil when the endpoint answered well.
	Err error
}

// ok tells whether the endpoint answered well.
func (e endpointState) ok() bool { return e.Err == nil }

// Count is a list count that may be unknown: a list that could not be read
// has no count, which is not the same as a count of zero.
type Count struct {
	Value int64
	Known bool
}

// locationState is the outcome of one location's detail view.
type locationState struct {
	ID       int64
	Status   int
	Duration time.Duration
	Err      error
	// Fields holds the requested info fields found in the detail view.
	Fields map[string]string
	// Checked is when the check was sent.
	Checked time.Time
}

// upEndpoints are the endpoints that deployment_service_up depends on.
var upEndpoints = []client.Endpoint{client.EndpointRoot, client.EndpointProjects, client.EndpointLocations}

// up tells whether all three lists and the root answered well.
func (s *Snapshot) up() bool {
	for _, ep := range upEndpoints {
		if st, ok := s.Endpoints[ep]; !ok || !st.ok() {
			return false
		}
	}
	return true
}

// failedSnapshot stands for a poll that sent nothing: every endpoint is
// down with the given status and error, and every location of the subset
// keeps the result of its last check.
func failedSnapshot(start time.Time, t *Target, book *locationBook, status int, err error) *Snapshot {
	s := &Snapshot{Start: start, Endpoints: make(map[client.Endpoint]endpointState, 4)}
	for _, ep := range upEndpoints {
		s.Endpoints[ep] = endpointState{Status: status, Err: err}
	}
	if t.wantsDetails() {
		s.Endpoints[client.EndpointLocationDetail] = endpointState{Status: status, Err: err}
		ids := t.DetailIDs
		if len(ids) == 0 {
			ids = book.ids()
		}
		s.Details = book.view(ids)
	}
	return s
}
