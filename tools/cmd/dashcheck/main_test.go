package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRepositoryDashboards keeps grafana/dashboards strictly decodable by the
// Grafana Foundation SDK's dashboard types.
func TestRepositoryDashboards(t *testing.T) {
	files, err := dashboards([]string{filepath.Join("..", "..", "..", "grafana", "dashboards")})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		problems, err := checkFile(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if len(problems) > 0 {
			t.Errorf("%s does not decode strictly:\n%s", f, strings.Join(problems, "\n"))
		}
	}
}

// TestReportsMissingAndUnknown makes sure the check is strict: a required
// field left out, an unknown field added, at the dashboard, in a panel's
// options (decoded by the panel plugin's type) and in a template variable.
func TestReportsMissingAndUnknown(t *testing.T) {
	raw := []byte(`{
  "title": "t",
  "schemaVersion": 39,
  "bogus": 1,
  "panels": [
    {
      "type": "stat",
      "title": "s",
      "gridPos": {"h": 4, "w": 4, "x": 0, "y": 0},
      "fieldConfig": {"defaults": {}, "overrides": []},
      "options": {
        "reduceOptions": {"calcs": ["lastNotNull"]},
        "colorMode": "value", "graphMode": "none", "justifyMode": "auto",
        "textMode": "auto", "wideLayout": true, "showPercentChange": false,
        "orientation": "auto"
      }
    }
  ],
  "templating": {"list": [{"name": "v", "type": "custom", "current": {}}]}
}`)
	problems, err := check(raw)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(problems, "\n")
	for _, want := range []string{
		"unexpected field 'bogus'",
		"panels[0].options.percentChangeColorMode: required field is missing",
		"templating.list[0].current.text: required field is missing",
		"templating.list[0].current.value: required field is missing",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("want a problem containing %q, got:\n%s", want, got)
		}
	}
}

func TestNoDashboards(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := dashboards([]string{dir}); err == nil {
		t.Error("a directory without *.json must be an error, not a silent pass")
	}
}

func TestNotJSON(t *testing.T) {
	if _, err := check([]byte("not json")); err == nil {
		t.Error("want an error for input that is no JSON")
	}
}
