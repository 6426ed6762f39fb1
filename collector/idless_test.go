package collector

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/deployment-service/deployment_service_exporter/sampleservice"
)

// A list whose entries carry no integer id (Django REST framework's
// hyperlinked serializers give a url instead) is counted and stays up; only
// the detail views drawn from it fail, as location_detail invalid_body.
func TestListWithoutIDsFailsOnlyTheDetailViews(t *testing.T) {
	r := newRig(t, rigOptions{
		service:     sampleservice.Options{Projects: 3, Locations: 120, PageSize: 50, OmitIDs: true},
		detailLimit: 3,
		infoFields:  []string{"name"},
	})
	reg := r.gather(t)
	compare(t, reg, upHelp+"deployment_service_up 1\n", "deployment_service_up")
	compare(t, reg, locationsHelp+"deployment_service_locations 120\n", "deployment_service_locations")
	compare(t, reg, endpointUpHelp+`deployment_service_endpoint_up{endpoint="location_detail"} 0
deployment_service_endpoint_up{endpoint="locations"} 1
deployment_service_endpoint_up{endpoint="projects"} 1
deployment_service_endpoint_up{endpoint="root"} 1
`, "deployment_service_endpoint_up")
	compare(t, reg, statusHelp+`deployment_service_endpoint_status_code{endpoint="location_detail"} 0
deployment_service_endpoint_status_code{endpoint="locations"} 200
deployment_service_endpoint_status_code{endpoint="projects"} 200
deployment_service_endpoint_status_code{endpoint="root"} 200
`, "deployment_service_endpoint_status_code")
	if n, err := testutil.GatherAndCount(reg, "deployment_service_location_up", "deployment_service_location_info"); err != nil || n != 0 {
		t.Errorf("got %d per-location series for locations without ids (%v), want none", n, err)
	}
	// The client counts each detail view it could not ask for, once.
	if got := r.requests.errorCount("location_detail", "invalid_body"); got != 3 {
		t.Errorf("request_errors_total{location_detail,invalid_body} = %v, want 3", got)
	}
	// Nothing was sent for them: the service saw no detail request.
	if n := r.svc.Requests("location_detail"); n != 0 {
		t.Errorf("the service saw %d detail requests, want none", n)
	}
}
