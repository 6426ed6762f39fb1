package config

import (
	"fmt"
	"regexp"
	"strings"
)

var labelNameRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// ValidateInfoFields refuses detail view fields that cannot become labels
// of deployment_service_location_info: invalid label names, names reserved
// by Prometheus, names that clash with labels the exporter or Prometheus
// set, and repeats.
func ValidateInfoFields(fields []string) error {
	seen := make(map[string]bool, len(fields))
	for _, f := range fields {
		switch {
		case !labelNameRE.MatchString(f):
			return fmt.Errorf("%q is not a valid label name (letters, digits and underscores, not starting with a digit)", f)
		case strings.HasPrefix(f, "__"):
			return fmt.Errorf("%q: names starting with __ are reserved by Prometheus", f)
		case f == "location_id" || f == "job" || f == "instance":
			return fmt.Errorf("%q clashes with a label the exporter or Prometheus sets", f)
		case seen[f]:
			return fmt.Errorf("%q is given twice", f)
		}
		seen[f] = true
	}
	return nil
}
