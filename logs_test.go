package main

import (
	"strings"
	"testing"

	"github.com/deployment-service/deployment_service_exporter/sampleservice"
)

// TestMetricsTargetLogLinesNameIt: the warn lines of the service behind
// /metrics name its target and module, as /probe's do.
func TestMetricsTargetLogLinesNameIt(t *testing.T) {
	svc, err := sampleservice.Start(sampleservice.Options{Key: "key-logs-1", Locations: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	svc.Service.SetFault(sampleservice.EndpointRoot, sampleservice.Fault{Status: 500})
	e := startExporter(t, []string{"DEPLOYMENT_SERVICE_API_KEY=key-logs-1"}, "--api.url="+svc.URL())
	e.get(t, "/metrics")
	var warn string
	for _, l := range strings.Split(e.stderr.String(), "\n") {
		if strings.Contains(l, "level=WARN") && strings.Contains(l, `msg="Endpoint failed"`) {
			warn = l
		}
	}
	if !strings.Contains(warn, "target="+svc.URL()) || !strings.Contains(warn, "module=(flags)") {
		t.Errorf("warn line %q does not name the target and module", warn)
	}
}
