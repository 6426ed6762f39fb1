package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDashboardsLint checks the repository's dashboards for what Grafana
// does not report on import: templated datasource on every panel and query,
// job and instance variables read from deployment_service_up and the
// exporter's own from deployment_service_exporter_build_info (so /probe
// targets, which have no exporter metrics, get a dashboard too), the
// Exporter row on the exporter's variables and every other row on the
// service's, legends that name the instance, latency read from native and
// classic histograms alike, unique panel ids and panels that do not overlap.
func TestDashboardsLint(t *testing.T) {
	files, err := filepath.Glob("../../../grafana/dashboards/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards found: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { lintDashboard(t, f) })
	}
}

type lintPanel struct {
	ID         int                      `json:"id"`
	Title      string                   `json:"title"`
	Type       string                   `json:"type"`
	Datasource json.RawMessage          `json:"datasource"`
	GridPos    struct{ X, Y, W, H int } `json:"gridPos"`
	Targets    []struct {
		Datasource   json.RawMessage `json:"datasource"`
		Expr         string          `json:"expr"`
		LegendFormat string          `json:"legendFormat"`
		RefID        string          `json:"refId"`
	} `json:"targets"`
}

// Variables of the watched service and of the exporter itself.
var (
	serviceVars  = []string{"job", "instance"}
	exporterVars = []string{"exporter_job", "exporter_instance"}
)

func usesVar(expr, name string) bool {
	for _, m := range varRef.FindAllStringSubmatch(expr, -1) {
		if m[1]+m[2]+m[3] == name {
			return true
		}
	}
	return false
}

// selectors finds every selector of an expression: its metric name and
// its label matchers.
var selectors = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)?\s*\{([^{}]*)\}`)

// sloMetadata are the series Sloth records once per SLO, about no target in
// particular: its objective, error budget and period.
var sloMetadata = map[string]bool{
	"slo:objective:ratio": true, "slo:error_budget:ratio": true, "slo:time_period:days": true, "sloth_slo_info": true,
}

// sloMetadataOnly reports whether expr reads nothing but an SLO's metadata,
// selected by sloth_id alone (slo:objective:ratio{sloth_id="..."}): one
// series per SLO, which no job or instance could select.
func sloMetadataOnly(expr string) bool {
	ms := selectors.FindAllStringSubmatch(expr, -1)
	for _, m := range ms {
		name, _, _ := strings.Cut(m[2], "=")
		if !sloMetadata[m[1]] || strings.TrimSpace(name) != "sloth_id" || strings.Contains(m[2], ",") {
			return false
		}
	}
	return len(ms) > 0
}

func TestSLOMetadataOnly(t *testing.T) {
	for expr, want := range map[string]bool{
		`slo:objective:ratio{sloth_id="deployment-service-availability"}`:                                          true,
		`slo:objective:ratio{sloth_id="x"} * on () group_left slo:time_period:days{sloth_id="x"}`:                  true,
		`slo:objective:ratio{sloth_id="x",job=~"$job"}`:                                                            false,
		`slo:sli_error:ratio_rate1h{job="a"}`:                                                                      false,
		`slo:objective:ratio`:                                                                                      false,
		`slo:sli_error:ratio_rate1h{sloth_id="x"} / on (sloth_id) group_left slo:error_budget:ratio{sloth_id="x"}`: false,
		`{__name__="slo:objective:ratio"}`:                                                                         false,
	} {
		if got := sloMetadataOnly(expr); got != want {
			t.Errorf("sloMetadataOnly(%q) = %v, want %v", expr, got, want)
		}
	}
}

// histogramMetric finds histogram series read through their classic buckets.
var histogramBucket = regexp.MustCompile(`\b([a-zA-Z_:][a-zA-Z0-9_:]*)_bucket\b`)

// lintHistograms requires every query that reads a histogram's classic
// buckets to read its native form too: with native histograms on and the
// classic buckets off (the default of Prometheus 3 with
// scrape_native_histograms), no _bucket series exist.
func lintHistograms(expr string) error {
	for _, m := range histogramBucket.FindAllStringSubmatch(expr, -1) {
		native := regexp.MustCompile(`\b` + regexp.QuoteMeta(m[1]) + `\s*[{\[]`)
		if !native.MatchString(expr) {
			return fmt.Errorf("reads %s_bucket but not the native histogram %s: add `or histogram_quantile(…, sum by (…) (rate(%s[…])))`", m[1], m[1], m[1])
		}
	}
	return nil
}

func TestRulesLint(t *testing.T) {
	files, err := filepath.Glob("../../../deploy/prometheus/rules/*.yml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no rule files found: %v", err)
	}
	for _, f := range files {
		qs, err := loadRules(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range qs {
			if err := lintHistograms(q.expr); err != nil {
				t.Errorf("%s: %v", q.source, err)
			}
		}
	}
}

func TestLintHistograms(t *testing.T) {
	const x = "deployment_service_request_duration_seconds"
	ok := []string{
		`sum(rate(` + x + `_count[5m]))`,
		`histogram_quantile(0.5, sum by (endpoint) (rate(` + x + `{job="a"}[5m]))) or histogram_quantile(0.5, sum by (endpoint, le) (rate(` + x + `_bucket{job="a"}[5m])))`,
		`histogram_quantile(0.5, rate(` + x + `[5m])) or histogram_quantile(0.5, rate(` + x + `_bucket[5m]))`,
	}
	for _, e := range ok {
		if err := lintHistograms(e); err != nil {
			t.Errorf("lintHistograms(%q) = %v", e, err)
		}
	}
	if err := lintHistograms(`histogram_quantile(0.5, sum by (le) (rate(` + x + `_bucket[5m])))`); err == nil {
		t.Error("classic buckets alone pass")
	}
}

func lintDashboard(t *testing.T, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID        string      `json:"uid"`
		Panels     []lintPanel `json:"panels"`
		Templating struct {
			List []variable `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if d.UID == "" {
		t.Error("dashboard has no uid: provisioning would give it a new one on every load")
	}
	vars := map[string]variable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	if vars["datasource"].Type != "datasource" {
		t.Error("no datasource variable")
	}
	for _, name := range serviceVars {
		if v, ok := vars[name]; !ok || !strings.Contains(v.queryString(), "deployment_service_up") {
			t.Errorf("variable %s must be read from deployment_service_up", name)
		}
	}
	for _, name := range exporterVars {
		if v, ok := vars[name]; !ok || !strings.Contains(v.queryString(), "deployment_service_exporter_build_info") {
			t.Errorf("variable %s must be read from deployment_service_exporter_build_info", name)
		}
	}
	row := ""
	ids := map[int]bool{}
	cells := map[[2]int]string{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel %q: duplicate id %d", p.Title, p.ID)
		}
		ids[p.ID] = true
		for x := p.GridPos.X; x < p.GridPos.X+p.GridPos.W; x++ {
			for y := p.GridPos.Y; y < p.GridPos.Y+p.GridPos.H; y++ {
				if other, taken := cells[[2]int{x, y}]; taken {
					t.Fatalf("panel %q overlaps panel %q at x=%d y=%d", p.Title, other, x, y)
				}
				cells[[2]int{x, y}] = p.Title
			}
		}
		if p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q is wider than the grid", p.Title)
		}
		if p.Type == "row" {
			row = p.Title
			continue
		}
		lintQueries(t, row, p)
		if !strings.Contains(string(p.Datasource), "${datasource}") {
			t.Errorf("panel %q does not use the datasource variable", p.Title)
		}
		for _, tg := range p.Targets {
			if !strings.Contains(string(tg.Datasource), "${datasource}") {
				t.Errorf("panel %q has a query that does not use the datasource variable", p.Title)
			}
		}
	}
}

// lintQueries checks a panel's queries: the Exporter row reads the
// exporter's job (a /probe target has no exporter metrics), every other row
// the watched service's (except a query of an SLO's objective, budget or
// period alone, which are about no service); legends name the instance,
// since several may be shown; latency reads native and classic histograms
// alike.
func lintQueries(t *testing.T, row string, p lintPanel) {
	t.Helper()
	want, avoid := serviceVars, exporterVars
	if row == "Exporter" {
		want, avoid = exporterVars, serviceVars
	}
	for _, tg := range p.Targets {
		where := fmt.Sprintf("row %q panel %q query %s", row, p.Title, tg.RefID)
		for _, v := range avoid {
			if usesVar(tg.Expr, v) {
				t.Errorf("%s uses $%s; this row selects with %s", where, v, strings.Join(want, " and "))
			}
		}
		usesAll := true
		for _, v := range want {
			usesAll = usesAll && usesVar(tg.Expr, v)
		}
		if !usesAll && strings.Contains(tg.Expr, "{") && !sloMetadataOnly(tg.Expr) {
			t.Errorf("%s does not select with both %s", where, strings.Join(want, " and "))
		}
		if p.Type != "table" && usesVar(tg.Expr, want[1]) && !strings.Contains(tg.LegendFormat, "{{instance}}") {
			t.Errorf("%s: legend %q does not name the instance", where, tg.LegendFormat)
		}
		if err := lintHistograms(tg.Expr); err != nil {
			t.Errorf("%s %v", where, err)
		}
	}
}
