package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The job names the rule files and the dashboards ship with.
const (
	defaultJob      = "deployment_service"
	defaultProbeJob = "deployment_service_probe"
)

// renameJobs gives the rules' job matchers the job names of the manifests,
// as the chart does with serviceMonitor.jobLabel and probeJobLabel.
func renameJobs(spec *monitoringv1.PrometheusRuleSpec, job, probeJob string) {
	r := strings.NewReplacer(`job="`+defaultJob+`"`, `job="`+job+`"`, `job="`+defaultProbeJob+`"`, `job="`+probeJob+`"`)
	for gi := range spec.Groups {
		for ri := range spec.Groups[gi].Rules {
			rule := &spec.Groups[gi].Rules[ri]
			rule.Expr = intstr.FromString(r.Replace(rule.Expr.String()))
		}
	}
}

// dashboards checks that the manifests hold each dashboard of dir exactly
// once, in a ConfigMap in the namespace wanted and labelled
// grafana_dashboard="1" for Grafana's sidecar: the file byte for byte, or,
// with another job than deployment_service, the file whose variables job
// and exporter_job default to that job instead.
func (c *checker) dashboards(dir, namespace string) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if !c.expect(err == nil && len(files) > 0, "-dashboards %s: no *.json files (%v)", dir, err) {
		return
	}
	names := map[string]bool{}
	for _, f := range files {
		name := filepath.Base(f)
		names[name] = true
		want, err := os.ReadFile(f)
		if !c.expect(err == nil, "%v", err) {
			continue
		}
		n := 0
		for _, m := range c.objs.configMaps {
			got, ok := m.Data[name]
			if !ok {
				continue
			}
			n++
			c.expect(m.Labels["grafana_dashboard"] == "1", "ConfigMap %s: needs the label grafana_dashboard: \"1\", which Grafana's sidecar selects by", m.Name)
			c.expect(namespace == "" || m.Namespace == namespace, "ConfigMap %s: namespace %q, want %q", m.Name, m.Namespace, namespace)
			if c.job == defaultJob {
				c.expect(got == string(want), "ConfigMap %s: %s differs from %s: %s", m.Name, name, f, firstDiff([]byte(got), want))
			} else {
				c.expect(sameDashboard(got, want, c.job), "ConfigMap %s: %s is not %s with the default job %q", m.Name, name, f, c.job)
			}
		}
		c.expect(n == 1, "want the dashboard %s in 1 ConfigMap, have %d", name, n)
	}
	for _, m := range c.objs.configMaps {
		for k := range m.Data {
			c.expect(!strings.HasSuffix(k, ".json") || names[k], "ConfigMap %s: %s is no dashboard of %s", m.Name, k, dir)
		}
	}
}

// sameDashboard reports whether got is the dashboard want with job as the
// default of its variables job and exporter_job.
func sameDashboard(got string, want []byte, job string) bool {
	var g, w map[string]any
	if json.Unmarshal([]byte(got), &g) != nil || json.Unmarshal(want, &w) != nil {
		return false
	}
	templating, _ := w["templating"].(map[string]any)
	list, _ := templating["list"].([]any)
	set := 0
	for _, v := range list {
		v, _ := v.(map[string]any)
		if v["name"] == "job" || v["name"] == "exporter_job" {
			v["current"] = map[string]any{"text": job, "value": job}
			set++
		}
	}
	return set == 2 && reflect.DeepEqual(g, w)
}
