package main

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/alecthomas/units"

	"github.com/deployment-service/deployment_service_exporter/sampleservice"
)

// intFlag is a whole-number flag: kingpin's Int takes 2.5 too.
type intFlag int

func (i *intFlag) Set(s string) error {
	n, err := strconv.ParseInt(s, 0, strconv.IntSize)
	if err == nil {
		*i = intFlag(n)
	}
	return err
}

func (i *intFlag) String() string { return strconv.Itoa(int(*i)) }

// byteSize is a flag of bytes, with or without a unit (64MiB, 10MB):
// kingpin's Bytes takes no plain number, and reads MB as MiB.
type byteSize int64

func (b *byteSize) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		n, err = units.ParseStrictBytes(s)
	}
	if err != nil {
		return fmt.Errorf("%q is not a size in bytes, such as 67108864 or 64MiB", s)
	}
	*b = byteSize(n)
	return nil
}

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

// flagError turns kingpin's error about a flag's value into one line
// naming the flag and what it takes: kingpin names neither ("time:
// invalid duration"), and says "unexpected false" of --api.gzip=false.
func flagError(app *kingpin.Application, args []string, err error) error {
	for _, a := range args {
		name, _, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if a == "--" {
			break
		}
		if f := app.GetFlag(strings.TrimPrefix(name, "no-")); ok && strings.HasPrefix(a, "--") && f != nil && f.Model().IsBoolFlag() {
			return fmt.Errorf("--%s takes no value: give --%[2]s or --no-%[2]s", name, f.Model().Name)
		}
	}
	pc, _ := app.ParseContext(args)
	for _, el := range pc.Elements {
		// The flag whose value fails to set again is the one that failed.
		f, ok := el.Clause.(*kingpin.FlagClause)
		if !ok || el.Value == nil || f.Model().Value.Set(*el.Value) == nil {
			continue
		}
		what, v := err.Error(), *el.Value
		var num *strconv.NumError
		switch {
		case errors.As(err, &num) && num.Err == strconv.ErrRange:
			what = fmt.Sprintf("%q is out of range", v)
		case errors.As(err, &num) && num.Func == "ParseFloat":
			what = fmt.Sprintf("%q is not a number, such as 2.5", v)
		case errors.As(err, &num):
			what = fmt.Sprintf("%q is not a whole number", v)
		case strings.HasPrefix(what, "time: "):
			what = fmt.Sprintf("%q is not a duration, such as 10s", v)
		}
		return fmt.Errorf("--%s: %s", f.Model().Name, what)
	}
	return err
}

// demoView is a view of the sample service: an endpoint, or the detail
// view of one location when id is positive.
type demoView struct {
	endpoint string
	id       int
}

// demoFaults is the repeatable --demo.fault flag, ENDPOINT:FAULT. Faults
// given for one view add up, so that it can be slow and fail.
type demoFaults struct {
	specs  []string
	faults map[demoView]sampleservice.Fault
}

func (d *demoFaults) Set(s string) error {
	endpoint, fault, ok := strings.Cut(s, ":")
	if !ok {
		return fmt.Errorf("%q is not ENDPOINT:FAULT, such as root:500, locations:429/30 or projects:delay/2.5s", s)
	}
	v := demoView{endpoint: endpoint}
	if id, ok := strings.CutPrefix(endpoint, sampleservice.EndpointLocationDetail+"/"); ok {
		n, err := strconv.ParseUint(id, 10, 31)
		if err != nil || n == 0 {
			return fmt.Errorf("%q: the location id is a whole number from 1, such as location_detail/3", s)
		}
		v = demoView{sampleservice.EndpointLocationDetail, int(n)}
	} else if !slices.Contains([]string{sampleservice.EndpointRoot, sampleservice.EndpointProjects, sampleservice.EndpointLocations, sampleservice.EndpointLocationDetail}, endpoint) {
		return fmt.Errorf("%q: the endpoint is root, projects, locations, location_detail or location_detail/<id>", s)
	}
	f := d.faults[v]
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
	default:
		return fmt.Errorf("%q: the fault is 401, 403, 404, 500, 502, 503, 429/<seconds>, 503/<seconds> or delay/<duration>, such as delay/2.5s", s)
	}
	if d.faults == nil {
		d.faults = map[demoView]sampleservice.Fault{}
	}
	d.faults[v] = f
	d.specs = append(d.specs, s)
	return nil
}

func (d *demoFaults) String() string { return strings.Join(d.specs, " ") }

// IsCumulative tells kingpin that the flag may be repeated.
func (*demoFaults) IsCumulative() bool { return true }
