package main

import (
	"testing"
	"time"
)

func TestInterpolate(t *testing.T) {
	vars := builtins(time.Minute, 15*time.Second, time.Hour)
	vars["job"] = "deployment_service"
	vars["instance"] = `(127\\.0\\.0\\.1:1234)`
	tests := []struct {
		name, in, want string
		err            bool
	}{
		{"dollar", `up{job=~"$job"}`, `up{job=~"deployment_service"}`, false},
		{"braces and format", `up{job=~"${job}",instance=~"${instance:regex}"}`, `up{job=~"deployment_service",instance=~"(127\\.0\\.0\\.1:1234)"}`, false},
		{"brackets", `up{job=~"[[job]]"}`, `up{job=~"deployment_service"}`, false},
		{"rate interval is not range", `rate(x[$__rate_interval]) + avg_over_time(y[$__range])`, `rate(x[60s]) + avg_over_time(y[3600s])`, false},
		{"unknown", `up{job=~"$nope"}`, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := interpolate(tt.in, vars)
			if (err != nil) != tt.err {
				t.Fatalf("interpolate(%q) error = %v, want error %v", tt.in, err, tt.err)
			}
			if got != tt.want {
				t.Errorf("interpolate(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestFormatValues(t *testing.T) {
	tests := []struct {
		name string
		v    variable
		in   []string
		want string
	}{
		{"single", variable{}, []string{"a.b", "c"}, "a.b"},
		// The regex's backslash is escaped for the PromQL string, as Grafana does.
		{"multi", variable{Multi: true}, []string{"a.b", "c"}, `(a\\.b|c)`},
		{"all value", variable{IncludeAll: true, AllValue: ".+"}, []string{"a"}, ".+"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := formatValues(tt.v, tt.in); got != tt.want {
				t.Errorf("formatValues = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLabelValuesPattern(t *testing.T) {
	m := labelValues.FindStringSubmatch(`label_values(deployment_service_up{job=~"$job"}, instance)`)
	if m == nil || m[1] != `deployment_service_up{job=~"$job"}` || m[2] != "instance" {
		t.Fatalf("label_values with selector not parsed: %q", m)
	}
	m = labelValues.FindStringSubmatch(`label_values(job)`)
	if m == nil || m[1] != "" || m[2] != "job" {
		t.Fatalf("label_values without selector not parsed: %q", m)
	}
}

func TestLoadDashboard(t *testing.T) {
	vars, qs, err := loadDashboard("../../../grafana/dashboards/deployment_service.json", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(vars) == 0 || len(qs) == 0 {
		t.Fatalf("got %d variables and %d queries", len(vars), len(qs))
	}
}
