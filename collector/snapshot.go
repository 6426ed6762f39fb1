package collector

import (
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

func (s *Snapshot) checkedDetails() []locationState {
	return slices.DeleteFunc(slices.Clone(s.Details), func(d locationState) bool { return d.Checked.Before(s.Start) })
}

// endpointState is how one endpoint answered during a poll; Status is 0 when no response came.
type endpointState struct {
	Status   int
	Duration time.Duration
	Err      error
}

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
		return !ok || st.Err != nil
	})
}
