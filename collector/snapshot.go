package collector

import (
	"errors"
	"slices"
	"time"

	"github.com/deployment-service/deployment_service_exporter/client"
)

// Snapshot is what one poll of the API found, as plain values.
type Snapshot struct {
	Start               time.Time
	Duration            time.Duration
	Endpoints           map[client.Endpoint]endpointState
	Projects, Locations Count
	Details             []locationState // each subset location's last check, by this poll or an earlier one
	HoldOffUntil        time.Time       // the end of the hold-off in force; zero if none

	trace  *client.Trace
	budget time.Duration // of a poll that its deadline cut short; 0 for one that ended on its own
}

// reusableFor tells whether a scrape with budget may reuse this poll, which its deadline may have cut.
func (s *Snapshot) reusableFor(budget time.Duration) bool {
	return s.budget == 0 || s.budget >= budget-budget/20
}

// onlyOutOfTime tells whether every list that failed, root included, ran out of time.
func (s *Snapshot) onlyOutOfTime() bool {
	return !slices.ContainsFunc(upEndpoints, func(ep client.Endpoint) bool {
		st := s.Endpoints[ep]
		return st.Err != nil && !errors.Is(st.Err, errTooLate) && client.ReasonOf(st.Err) != client.ReasonTimeout
	})
}

func (s *Snapshot) checkedDetails() []locationState {
	return slices.DeleteFunc(slices.Clone(s.Details), func(d locationState) bool { return d.Checked.Before(s.Start) })
}

func (s *Snapshot) at(now time.Time) *Snapshot {
	if s.HoldOffUntil.IsZero() || now.Before(s.HoldOffUntil) {
		return s
	}
	c := *s
	c.HoldOffUntil = time.Time{}
	return &c
}

// endpointState is how one endpoint answered during a poll; Status is 0 when no response came.
type endpointState struct {
	Status   int
	Duration time.Duration
	Err      error
}

func (e endpointState) ok() bool { return e.Err == nil }

// Count is a list count; Known is false when the list could not be read.
type Count struct {
	Value int64
	Known bool
}

type locationState struct {
	ID       int64
	Status   int
	Duration time.Duration
	Err      error
	Fields   map[string]string
	Checked  time.Time
}

var upEndpoints = []client.Endpoint{client.EndpointRoot, client.EndpointProjects, client.EndpointLocations}

func (s *Snapshot) up() bool {
	return !slices.ContainsFunc(upEndpoints, func(ep client.Endpoint) bool {
		st, ok := s.Endpoints[ep]
		return !ok || !st.ok()
	})
}
