package sampleservice

import (
	"maps"
	"strings"
	"testing"
	"time"
)

func TestFaultFlag(t *testing.T) {
	type fault = Fault
	good := []struct {
		specs []string
		want  map[string]fault
	}{
		{[]string{"root:500"}, map[string]fault{"root": {Status: 500}}},
		{[]string{"root:401"}, map[string]fault{"root": {Status: 401}}},
		{[]string{"projects:403", "locations:502"}, map[string]fault{"projects": {Status: 403}, "locations": {Status: 502}}},
		{[]string{"location_detail:404"}, map[string]fault{"location_detail": {Status: 404}}},
		{[]string{"location_detail/3:404"}, map[string]fault{"location_detail/3": {Status: 404}}},
		{[]string{"location_detail/3:404", "location_detail/03:delay/1s"}, map[string]fault{"location_detail/3": {Status: 404, Delay: time.Second}}},
		{[]string{"locations:429/30"}, map[string]fault{"locations": {Status: 429, RetryAfter: "30"}}},
		{[]string{"root:503"}, map[string]fault{"root": {Status: 503}}},
		{[]string{"root:503/0"}, map[string]fault{"root": {Status: 503, RetryAfter: "0"}}},
		{[]string{"projects:delay/2.5s"}, map[string]fault{"projects": {Delay: 2500 * time.Millisecond}}},
		// Faults of one view add up; a later status replaces an earlier one.
		{[]string{"root:delay/1s", "root:500", "root:502"}, map[string]fault{"root": {Status: 502, Delay: time.Second}}},
		{[]string{"root:429/9", "root:500"}, map[string]fault{"root": {Status: 500}}},
	}
	for _, tt := range good {
		t.Run(strings.Join(tt.specs, " "), func(t *testing.T) {
			var d FaultFlag
			for _, s := range tt.specs {
				if err := d.Set(s); err != nil {
					t.Fatalf("Set(%q): %v", s, err)
				}
			}
			if !maps.Equal(d.faults, tt.want) {
				t.Errorf("faults %v, want %v", d.faults, tt.want)
			}
			if got := d.String(); got != strings.Join(tt.specs, " ") {
				t.Errorf("String() = %q", got)
			}
		})
	}
	bad := map[string]string{
		"root":                     `"root" is not ENDPOINT:FAULT, such as root:500, locations:429/30 or projects:delay/2.5s`,
		"":                         "is not ENDPOINT:FAULT",
		"api:500":                  `"api:500": the endpoint is root, projects, locations, location_detail or location_detail/<id>`,
		"Root:500":                 "the endpoint is root",
		"location_detail/:404":     `"location_detail/:404": the location id is a whole number from 1, such as location_detail/3`,
		"location_detail/0:404":    "the location id is a whole number from 1",
		"location_detail/x:404":    "the location id is a whole number from 1",
		"location_detail/-2:404":   "the location id is a whole number from 1",
		"root:418":                 `"root:418": the fault is 401, 403, 404, 500, 502, 503, 429/<seconds>, 503/<seconds> or delay/<duration>, such as delay/2.5s`,
		"root:200":                 "the fault is 401",
		"root:429":                 `"root:429": the Retry-After seconds are missing: say root:429/30 for 30 seconds`,
		"root:429/":                `"root:429/": the Retry-After seconds are missing: say root:429/30 for 30 seconds`,
		"root:429/soon":            "the fault is 401",
		"root:429/-5":              "the fault is 401",
		"root:429/+5":              "the fault is 401",
		"root:500/30":              "the fault is 401",
		"root:delay":               "the fault is 401",
		"root:delay/2.5":           `"root:delay/2.5": the delay has no unit: say delay/2.5s or delay/2.5ms`,
		"projects:delay/10":        "the delay has no unit: say delay/10s",
		"root:delay/0s":            "the fault is 401",
		"root:delay/-1s":           "the fault is 401",
		"root:":                    "the fault is 401",
		"projects:delay/2.5s:more": "the fault is 401",
	}
	for spec, want := range bad {
		t.Run("refused "+spec, func(t *testing.T) {
			var d FaultFlag
			err := d.Set(spec)
			if err == nil {
				t.Fatalf("Set(%q) accepted it: %v", spec, d.faults)
			}
			if msg := err.Error(); !strings.Contains(msg, want) || strings.Contains(msg, "\n") {
				t.Errorf("error %q: want one line with %q", msg, want)
			}
		})
	}
}
