// Command dashcheck decodes Grafana dashboards strictly with the Grafana
// Foundation SDK's dashboard types (github.com/grafana/grafana-foundation-sdk),
// a schema nobody here wrote: every field the schema requires must be present
// and every field present must be known to it, in the dashboard, its panels,
// their field config, options (per panel plugin) and queries (per datasource
// type), its template variables and annotations. It fails listing each
// missing or unknown field by its JSON path.
//
//	dashcheck grafana/dashboards            # every *.json under the directory
//	dashcheck grafana/dashboards/x.json ...
package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

func main() {
	if len(os.Args) < 2 || strings.HasPrefix(os.Args[1], "-") {
		fmt.Fprintln(os.Stderr, "usage: dashcheck DIR_OR_FILE...")
		os.Exit(2)
	}
	files, err := dashboards(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "dashcheck:", err)
		os.Exit(1)
	}
	failed := false
	for _, f := range files {
		problems, err := checkFile(f)
		if err != nil {
			fmt.Fprintf(os.Stderr, "FAIL %s: %v\n", f, err)
			failed = true
			continue
		}
		if len(problems) > 0 {
			fmt.Fprintf(os.Stderr, "FAIL %s does not decode strictly with the Grafana Foundation SDK (%d problems):\n", f, len(problems))
			for _, p := range problems {
				fmt.Fprintln(os.Stderr, "     "+p)
			}
			failed = true
			continue
		}
		fmt.Printf("ok   %s decodes strictly with the Grafana Foundation SDK\n", f)
	}
	if failed {
		os.Exit(1)
	}
}

// dashboards expands the arguments: a directory stands for every *.json file
// under it. It is an error when none is found.
func dashboards(args []string) ([]string, error) {
	var files []string
	for _, arg := range args {
		info, err := os.Stat(arg)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			files = append(files, arg)
			continue
		}
		err = filepath.WalkDir(arg, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && strings.HasSuffix(path, ".json") {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no dashboard (*.json) in %s", strings.Join(args, " "))
	}
	return files, nil
}

// checkFile decodes one dashboard strictly and returns what the schema
// rejects, one "path: message" line each, in the order the SDK finds them. An error means the file
// could not be read or is no JSON object at all.
func checkFile(path string) ([]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return check(raw)
}

func check(raw []byte) ([]string, error) {
	// Panel options, field config and queries are decoded by the types of
	// their panel plugin and datasource only once these are registered;
	// without them they would be accepted as anything.
	plugins.RegisterDefaultPlugins()

	var d dashboard.Dashboard
	err := d.UnmarshalJSONStrict(raw)
	if err == nil {
		return nil, nil
	}
	var buildErrs cog.BuildErrors
	if !errors.As(err, &buildErrs) {
		var one *cog.BuildError
		if !errors.As(err, &one) {
			return nil, err
		}
		buildErrs = cog.BuildErrors{one}
	}
	problems := make([]string, 0, len(buildErrs))
	for _, e := range buildErrs {
		problems = append(problems, e.Error())
	}
	return problems, nil
}
