package main

import (
	"net/url"
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
	// The log reaches the test through a pipe, a moment after the scrape.
	var warn string
	eventually(t, "the failure was logged", func() bool {
		for _, l := range strings.Split(e.stderr.String(), "\n") {
			if strings.Contains(l, "level=WARN") && strings.Contains(l, `msg="Endpoint failed"`) {
				warn = l
			}
		}
		return warn != ""
	})
	if !strings.Contains(warn, "target="+svc.URL()) || !strings.Contains(warn, "module=(flags)") {
		t.Errorf("warn line %q does not name the target and module", warn)
	}
}

// TestExternalURLLinksEachTarget: with --web.external-url, every answer's
// deployment_service_target_info links to the exporter's page about its
// target: the landing page for /metrics, the debug view for /probe.
func TestExternalURLLinksEachTarget(t *testing.T) {
	svc, err := sampleservice.Start(sampleservice.Options{Key: "key-ext-1", Locations: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	dir := t.TempDir()
	cfg := writeTestFile(t, dir, "config.yml", "modules:\n  default:\n    targets: [\""+svc.URL()+"\"]\n    http_client_config: {authorization: {type: Token, credentials: key-ext-1}}\n")
	e := startExporter(t, []string{"DEPLOYMENT_SERVICE_API_KEY=key-ext-1"}, "--api.url="+svc.URL(),
		"--config.file="+cfg, "--web.external-url=https://exporter.example.com/ops/")
	_, metrics := e.get(t, "/metrics")
	if want := `deployment_service_target_info{page="https://exporter.example.com/ops/",url="` + svc.URL() + `"} 1`; !strings.Contains(metrics, want) {
		t.Errorf("/metrics lacks %s", want)
	}
	_, probe := e.get(t, "/probe?target="+url.QueryEscape(svc.URL()))
	page := "https://exporter.example.com/ops/probe?" + url.Values{"debug": {"true"}, "module": {"default"}, "target": {svc.URL()}}.Encode()
	if want := `deployment_service_target_info{page="` + page + `",url="` + svc.URL() + `"} 1`; !strings.Contains(probe, want) {
		t.Errorf("/probe lacks %s:\n%s", want, probe)
	}
}
