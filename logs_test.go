package main

import (
	"net/url"
	"strings"
	"testing"

	"github.com/deployment-service/deployment_service_exporter/sampleservice"
)

// TestMetricsTargetLogLinesNameIt: the warn line of the service behind
// /metrics names it by its URL, with what failed.
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
			if strings.Contains(l, "level=WARN") && strings.Contains(l, `msg="Poll failed"`) {
				warn = l
			}
		}
		return warn != ""
	})
	if !strings.Contains(warn, "target="+svc.URL()+" ") || !strings.Contains(warn, `summary="failed: root http_status 500"`) || strings.Contains(warn, "flags") {
		t.Errorf("warn line %q does not name the target by its URL and what failed", warn)
	}
}

// TestExternalURLLinksEachTarget: with --web.external-url, every answer's
// deployment_service_target_info links to its target's page, which
// answers without polling.
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
	_, probe := e.get(t, "/probe?target="+url.QueryEscape(svc.URL()))
	for _, tc := range []struct{ answer, query string }{
		{metrics, url.Values{"target": {svc.URL()}}.Encode()},
		{probe, url.Values{"module": {"default"}, "target": {svc.URL()}}.Encode()},
	} {
		want := `deployment_service_target_info{page="https://exporter.example.com/ops/target?` + tc.query + `",url="` + svc.URL() + `"} 1`
		if !strings.Contains(tc.answer, want) {
			t.Errorf("answer lacks %s:\n%s", want, tc.answer)
		}
		sent := svc.Service.TotalRequests()
		if code, page := e.get(t, "/target?"+tc.query); code != 200 || !strings.Contains(page, "Latest poll") || svc.Service.TotalRequests() != sent {
			t.Errorf("/target?%s answered %d and sent %d requests:\n%s", tc.query, code, svc.Service.TotalRequests()-sent, page)
		}
	}
}
