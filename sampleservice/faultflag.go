package sampleservice

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// FaultFlag is a repeatable command-line value of faults, ENDPOINT:FAULT each (the exporter's
// --demo.fault); faults of one endpoint add up, and a later status replaces an earlier one.
type FaultFlag struct {
	specs  []string
	faults map[string]Fault // by endpoint, location_detail/<id> for one location
}

// Set adds one fault, or says in one line why spec is not one.
func (d *FaultFlag) Set(spec string) error {
	endpoint, fault, ok := strings.Cut(spec, ":")
	if !ok {
		return fmt.Errorf("%q is not ENDPOINT:FAULT, such as root:500, locations:429/30 or projects:delay/2.5s", spec)
	}
	if id, ok := strings.CutPrefix(endpoint, EndpointLocationDetail+"/"); ok {
		n, err := strconv.ParseUint(id, 10, 31)
		if err != nil || n == 0 {
			return fmt.Errorf("%q: the location id is a whole number from 1, such as location_detail/3", spec)
		}
		endpoint = fmt.Sprintf("%s/%d", EndpointLocationDetail, n) // one spelling per id
	} else if !slices.Contains([]string{EndpointRoot, EndpointProjects, EndpointLocations, EndpointLocationDetail}, endpoint) {
		return fmt.Errorf("%q: the endpoint is root, projects, locations, location_detail or location_detail/<id>", spec)
	}
	f := d.faults[endpoint]
	kind, arg, withArg := strings.Cut(fault, "/")
	status, _ := strconv.Atoi(kind)
	delay, delayErr := time.ParseDuration(arg)
	_, secondsErr := strconv.ParseUint(arg, 10, 31)
	switch {
	case kind == "delay" && delayErr == nil && delay > 0:
		f.Delay = delay
	case (kind == "429" || kind == "503") && withArg && secondsErr == nil:
		f.Status, f.RetryAfter = status, arg
	case !withArg && slices.Contains([]string{"401", "403", "404", "500", "502", "503"}, kind):
		f.Status, f.RetryAfter = status, ""
	case kind == "delay" && strings.Trim(arg, "0123456789.") == "" && arg != "":
		return fmt.Errorf("%q: the delay has no unit: say delay/%ss or delay/%sms", spec, arg, arg)
	case kind == "429" && arg == "":
		return fmt.Errorf("%q: the Retry-After seconds are missing: say %s/30 for 30 seconds", spec, strings.TrimSuffix(spec, "/"))
	default:
		return fmt.Errorf("%q: the fault is 401, 403, 404, 500, 502, 503, 429/<seconds>, 503/<seconds> or delay/<duration>, such as delay/2.5s", spec)
	}
	if d.faults == nil {
		d.faults = map[string]Fault{}
	}
	d.faults[endpoint] = f
	d.specs = append(d.specs, spec)
	return nil
}

func (d *FaultFlag) String() string { return strings.Join(d.specs, " ") }

// IsCumulative tells kingpin that the flag may be repeated.
func (*FaultFlag) IsCumulative() bool { return true }

// Apply makes s misbehave as d says.
func (d *FaultFlag) Apply(s *Service) {
	for endpoint, f := range d.faults {
		if id, ok := strings.CutPrefix(endpoint, EndpointLocationDetail+"/"); ok {
			n, _ := strconv.Atoi(id)
			s.SetDetailFault(n, f)
		} else {
			s.SetFault(endpoint, f)
		}
	}
}
