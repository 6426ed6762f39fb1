// Package flagcheck compares command lines written in deployment files with
// the flags that the exporter binary accepts, as its kingpin --help lists them.
package flagcheck

import (
	"fmt"
	"os"
	"regexp"
	"strings"
)

// flagLine matches one flag in kingpin's help output, such as
// "  -h, --[no-]help", "      --api.url=API.URL" or "      --[no-]demo".
var flagLine = regexp.MustCompile(`(?m)^\s+(?:-\w,\s+)?--(\[no-\])?([A-Za-z0-9][A-Za-z0-9._-]*)(=)?`)

// Set maps each accepted flag name (without dashes) to whether it takes a value.
type Set map[string]bool

// Parse reads the flags out of kingpin's --help output.
func Parse(help string) (Set, error) {
	s := Set{}
	for _, m := range flagLine.FindAllStringSubmatch(help, -1) {
		negatable, name, takesValue := m[1] != "", m[2], m[3] != ""
		s[name] = takesValue
		if negatable {
			s["no-"+name] = false
		}
	}
	if len(s) == 0 {
		return nil, fmt.Errorf("no flags found in the help output")
	}
	return s, nil
}

// ParseFile reads the flags out of a file holding kingpin's --help output.
func ParseFile(path string) (Set, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := Parse(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Check returns one error for each argument that the binary would refuse:
// an unknown flag, a value flag without a value, a value given to a boolean
// flag, or a positional argument (the exporter takes none).
func (s Set) Check(args []string) []error {
	var errs []error
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if !strings.HasPrefix(arg, "--") {
			errs = append(errs, fmt.Errorf("argument %q is not a flag", arg))
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
		takesValue, ok := s[name]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("flag --%s is not accepted by the binary", name))
		case takesValue && !hasValue:
			if i+1 >= len(args) {
				errs = append(errs, fmt.Errorf("flag --%s needs a value", name))
			}
			i++ // The next argument is the value.
		case !takesValue && hasValue:
			errs = append(errs, fmt.Errorf("flag --%s is boolean and takes no value", name))
		}
	}
	return errs
}
