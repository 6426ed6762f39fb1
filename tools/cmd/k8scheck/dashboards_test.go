package main

import (
	"cmp"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const dashboard = `{
  "title": "d",
  "templating": {
    "list": [
      {"name": "job", "current": {"text": "deployment_service", "value": "deployment_service"}},
      {"name": "exporter_job", "current": {"text": "deployment_service", "value": "deployment_service"}}
    ]
  }
}
`

// TestDashboards: the dashboard must be in one ConfigMap labelled for the
// sidecar, byte for byte, or with the manifests' job as its default job.
func TestDashboards(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "d.json"), []byte(dashboard), 0o644); err != nil {
		t.Fatal(err)
	}
	renamed := strings.ReplaceAll(dashboard, `"deployment_service"`, `"dse"`)
	configMap := func(labels, data string) string {
		quoted, err := json.Marshal(data) // a JSON string is a YAML one
		if err != nil {
			t.Fatal(err)
		}
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dash\n  namespace: grafana\n  labels:\n    " + labels +
			"\ndata:\n  d.json: " + string(quoted) + "\n"
	}
	exact := configMap(`grafana_dashboard: "1"`, dashboard)
	tests := []struct {
		name, manifests, job, namespace, wantError string
	}{
		{name: "exact", manifests: exact},
		{name: "namespace", manifests: exact, namespace: "grafana"},
		{name: "other namespace", manifests: exact, namespace: "monitoring", wantError: `namespace "grafana", want "monitoring"`},
		{name: "not exact", manifests: configMap(`grafana_dashboard: "1"`, strings.TrimSpace(dashboard)), wantError: "differs from"},
		{name: "no label", manifests: configMap(`app: x`, dashboard), wantError: "needs the label grafana_dashboard"},
		{name: "missing", manifests: strings.Replace(exact, "d.json", "e.json", 1), wantError: "want the dashboard d.json in 1 ConfigMap, have 0"},
		{name: "job renamed", manifests: configMap(`grafana_dashboard: "1"`, renamed), job: "dse"},
		{name: "job not renamed", manifests: exact, job: "dse", wantError: `with the default job "dse"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, _, err := decodeAll(strings.NewReader(tt.manifests))
			if err != nil {
				t.Fatal(err)
			}
			c := &checker{objs: objs, job: cmp.Or(tt.job, defaultJob)}
			c.dashboards(dir, tt.namespace)
			switch {
			case tt.wantError == "" && len(c.errs) > 0:
				t.Errorf("failures: %q", c.errs)
			case tt.wantError != "" && !slices.ContainsFunc(c.errs, func(e string) bool { return strings.Contains(e, tt.wantError) }):
				t.Errorf("failures %q, want one saying %q", c.errs, tt.wantError)
			}
		})
	}
}

func TestRenameJobs(t *testing.T) {
	spec := &monitoringv1.PrometheusRuleSpec{Groups: []monitoringv1.RuleGroup{{Name: "g", Rules: []monitoringv1.Rule{
		{Alert: "Down", Expr: intstr.FromString(`up{job="deployment_service"} == 0`)},
		{Alert: "Probe", Expr: intstr.FromString(`absent(up{job="deployment_service_probe"}) or up{job="deployment_service_other"}`)},
	}}}}
	renameJobs(spec, "dse", "dse_probe")
	for i, want := range []string{`up{job="dse"} == 0`, `absent(up{job="dse_probe"}) or up{job="deployment_service_other"}`} {
		if got := spec.Groups[0].Rules[i].Expr.String(); got != want {
			t.Errorf("expr = %s, want %s", got, want)
		}
	}
}
