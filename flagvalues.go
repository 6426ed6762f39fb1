package main

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/alecthomas/units"
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
