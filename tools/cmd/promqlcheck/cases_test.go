package main

import "testing"

func TestParseCase(t *testing.T) {
	c, err := parseCase("job=deployment_service_probe, instance=http://127.0.0.1:1234/a=b", true)
	if err != nil {
		t.Fatal(err)
	}
	if c.pins["job"] != "deployment_service_probe" || c.pins["instance"] != "http://127.0.0.1:1234/a=b" || !c.rules {
		t.Errorf("parseCase = %+v", c)
	}
	if got, want := c.String(), "instance=http://127.0.0.1:1234/a=b,job=deployment_service_probe"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	for _, bad := range []string{"", "job", "job=", "=x", "job=a,job=b"} {
		if _, err := parseCase(bad, false); err == nil {
			t.Errorf("parseCase(%q): no error", bad)
		}
	}
}

func TestCaseUsesAndMatches(t *testing.T) {
	c := checkCase{pins: map[string]string{"job": "j", "instance": "i"}}
	tests := []struct {
		expr string
		want bool
	}{
		{`up{job=~"$job"}`, true},
		{`up{instance=~"${instance:regex}"}`, true},
		{`up{job=~"$exporter_job"}`, false},
		{`vector($slo)`, false},
	}
	for _, tt := range tests {
		if got := c.usesAny(tt.expr); got != tt.want {
			t.Errorf("usesAny(%q) = %v, want %v", tt.expr, got, tt.want)
		}
	}
	if !c.matches(map[string]string{"job": "j", "instance": "i", "endpoint": "root"}) {
		t.Error("a series with the case's labels and more does not match")
	}
	if c.matches(map[string]string{"job": "j", "instance": "other"}) || c.matches(map[string]string{"job": "j"}) {
		t.Error("a series of another target matches")
	}
}

// TestCaseLabelsAny: a series about no target (an SLO's objective, one per
// SLO) carries none of the pinned labels; one of any target carries them.
func TestCaseLabelsAny(t *testing.T) {
	c := checkCase{pins: map[string]string{"job": "j", "instance": "i"}}
	if c.labelsAny(map[string]string{"sloth_id": "deployment-service-availability"}) {
		t.Error("an SLO's series without job and instance is taken for a target's")
	}
	if !c.labelsAny(map[string]string{"job": "other", "instance": "x"}) || !c.labelsAny(map[string]string{"instance": "x"}) {
		t.Error("a series of some target is taken for one of none")
	}
}

func TestFormatSelected(t *testing.T) {
	if got := formatSelected(variable{}, "a.b"); got != "a.b" {
		t.Errorf("single-value variable: %q", got)
	}
	// A multi-value variable with "All" still selects just the one value.
	if got, want := formatSelected(variable{Multi: true, IncludeAll: true, AllValue: ".+"}, "http://a.b:1"), `http://a\\.b:1`; got != want {
		t.Errorf("multi-value variable: %q, want %q", got, want)
	}
}

// TestMetricsOnly: the recording rules of the request families, which a
// /probe target has no data for, and no other.
func TestMetricsOnly(t *testing.T) {
	for expr, want := range map[string]bool{
		`sum by (job) (rate(deployment_service_requests_total[5m]))`:                            true,
		`rate(deployment_service_request_errors_total[5m])`:                                     true,
		`histogram_quantile(0.5, rate(deployment_service_request_duration_seconds_bucket[5m]))`: true,
		`instance_endpoint:deployment_service_request_duration_seconds:quantile_rate5m`:         true,
		`instance_endpoint_code:deployment_service_requests:rate5m`:                             true,
		`instance_endpoint_reason:deployment_service_request_errors:rate5m`:                     true,
		`1 / (rate(deployment_service_polls_total[15m]) > 0)`:                                   false,
		`max_over_time(deployment_service_endpoint_duration_seconds[1h])`:                       false,
	} {
		if got := metricsOnly.MatchString(expr); got != want {
			t.Errorf("metricsOnly(%q) = %v, want %v", expr, got, want)
		}
	}
}
