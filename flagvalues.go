package main

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/alecthomas/units"

	"github.com/deployment-service/deployment_service_exporter/sampleservice"
)

// The kingpin values below replace kingpin's own for the exporter's flags:
// kingpin's errors name neither the flag nor what it takes ("time: invalid
// duration"), and its int flags parse a float and truncate it, so
// --api.max-pages=1.5 would quietly be 1. nameFlagErrors then puts the
// flag's name in front of every error, the toolkit's and promslog's too.

// durationValue is a time.Duration flag.
type durationValue time.Duration

func (d *durationValue) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration, such as 10s", s)
	}
	*d = durationValue(v)
	return nil
}

func (d *durationValue) String() string { return time.Duration(*d).String() }

// intValue is an int flag that takes whole numbers only.
type intValue int

func (i *intValue) Set(s string) error {
	v, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("%q is not a whole number", s)
	}
	*i = intValue(v)
	return nil
}

func (i *intValue) String() string { return strconv.Itoa(int(*i)) }

// float64Value is a float64 flag.
type float64Value float64

func (f *float64Value) Set(s string) error {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return fmt.Errorf("%q is not a number, such as 2.5", s)
	}
	*f = float64Value(v)
	return nil
}

func (f *float64Value) String() string { return strconv.FormatFloat(float64(*f), 'g', -1, 64) }

// int64ListValue is a repeatable flag of whole numbers.
type int64ListValue []int64

func (l *int64ListValue) Set(s string) error {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("%q is not a whole number", s)
	}
	*l = append(*l, v)
	return nil
}

func (l *int64ListValue) String() string { return fmt.Sprint([]int64(*l)) }

// IsCumulative tells kingpin that the flag may be repeated.
func (*int64ListValue) IsCumulative() bool { return true }

// byteSize is a kingpin value that takes a plain number of bytes or one
// with a unit (64MiB, 10MB, 512KiB).
type byteSize int64

func (b *byteSize) Set(s string) error {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		*b = byteSize(n)
		return nil
	}
	n, err := units.ParseStrictBytes(s)
	if err != nil {
		return fmt.Errorf("%q is not a size in bytes, such as 67108864 or 64MiB", s)
	}
	*b = byteSize(n)
	return nil
}

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

// namedValue puts the flag's name in front of the errors of its value.
type namedValue struct {
	kingpin.Value
	name string
}

func (n namedValue) Set(s string) error {
	if err := n.Value.Set(s); err != nil {
		return fmt.Errorf("--%s: %w", n.name, err)
	}
	return nil
}

// namedBoolValue and namedListValue keep what kingpin asks of a value
// besides Set and String: whether it is a switch, whether it repeats.
type (
	namedBoolValue struct{ namedValue }
	namedListValue struct{ namedValue }
)

func (namedBoolValue) IsBoolFlag() bool   { return true }
func (namedListValue) IsCumulative() bool { return true }

// kingpinString is the type of kingpin's string flag values. They cannot
// fail, and kingpin quotes their defaults in the help by this type, so
// nameFlagErrors leaves them alone.
var kingpinString = func() reflect.Type {
	app := kingpin.New("", "")
	app.Flag("s", "").String()
	return reflect.TypeOf(app.GetFlag("s").Model().Value)
}()

// nameFlagErrors wraps the value of every flag of app that can refuse a
// value in a namedValue. Call it once all flags are defined.
func nameFlagErrors(app *kingpin.Application) {
	for _, m := range app.Model().Flags {
		if reflect.TypeOf(m.Value) == kingpinString {
			continue
		}
		v := namedValue{Value: m.Value, name: m.Name}
		var wrapped kingpin.Value = v
		if b, ok := m.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			wrapped = namedBoolValue{v}
		} else if c, ok := m.Value.(interface{ IsCumulative() bool }); ok && c.IsCumulative() {
			wrapped = namedListValue{v}
		}
		app.GetFlag(m.Name).SetValue(wrapped)
	}
}

// switchWithValue returns the message for a switch given a value, such as
// --api.gzip=false, which kingpin refuses as "unexpected false" without
// naming the flag; "" when args hold none.
func switchWithValue(app *kingpin.Application, args []string) string {
	for _, a := range args {
		if a == "--" {
			break
		}
		name, _, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !ok || !strings.HasPrefix(a, "--") {
			continue
		}
		flag := app.GetFlag(strings.TrimPrefix(name, "no-"))
		if flag == nil {
			continue
		}
		if m := flag.Model(); m.IsBoolFlag() {
			return fmt.Sprintf("--%s takes no value: give --%s or --no-%s", name, m.Name, m.Name)
		}
	}
	return ""
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
