package main

import (
	"flag"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/deployment-service/deployment_service_exporter/sampleservice"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden with the answers of this run")

// updateCommand is how to accept a change of the exposition.
const updateCommand = "go test . -run TestGoldenExposition -update"

const goldenKey = "golden-key-7c1d"

// TestGoldenExposition compares a whole /metrics answer and a whole /probe
// answer of the exporter binary, watching a small sample service, with the
// files under testdata/golden: any change of names, labels, HELP, TYPE or
// of the values that do not vary from run to run shows as a diff in
// review. Run updateCommand to accept one.
func TestGoldenExposition(t *testing.T) {
	svc, err := sampleservice.Start(sampleservice.Options{Key: goldenKey, Projects: 3, Locations: 12, PageSize: 5, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	dir := t.TempDir()
	writeTestFile(t, dir, "key", goldenKey+"\n")
	modules := writeTestFile(t, dir, "modules.yml", `modules:
  default:
    targets: ["http://127.0.0.1:*"]
    http_client_config: {authorization: {type: Token, credentials_file: key}}
    locations: {detail_ids: [2, 5], info_fields: [name]}
`)
	e := startExporter(t, []string{"DEPLOYMENT_SERVICE_API_KEY=" + goldenKey},
		"--api.url="+svc.URL(), "--locations.detail-id=2", "--locations.detail-id=5",
		"--locations.info-field=name", "--config.file="+modules)

	for _, tt := range []struct{ name, path string }{
		{"metrics", "/metrics"},
		{"probe", "/probe?target=" + url.QueryEscape(svc.URL())},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, body := e.get(t, tt.path)
			if code != http.StatusOK {
				t.Fatalf("%s answered %d: %s", tt.path, code, body)
			}
			checkGolden(t, filepath.Join("testdata", "golden", tt.name+".txt"), maskExposition(body, svc.Addr()))
		})
	}
}

// checkGolden compares got with the golden file at path, or rewrites the
// file with -update.
func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", path)
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run %s to create it)", err, updateCommand)
	}
	if got != string(want) {
		t.Errorf("the answer differs from %s (- golden, + now); if the change is meant, run %s and commit the file:\n%s",
			path, updateCommand, lineDiff(string(want), got))
	}
}

// What varies from run to run, and how the golden files hide it.
var (
	// droppedPrefixes are families left out whole: the Go runtime's and
	// the process's, whose sets depend on the Go version and the platform.
	droppedPrefixes = []string{"go_", "process_"}
	// maskedValueSuffixes name the families whose values are durations or
	// timestamps: their samples keep names and labels, the value becomes
	// maskedValue.
	maskedValueSuffixes = []string{"_seconds", "_seconds_total"}
	// maskedLabelFamilies are families whose label values describe the
	// build (version, revision, Go version, platform).
	maskedLabelFamilies = []string{"deployment_service_exporter_build_info"}
)

const maskedValue = "<varies>"

// serviceHost stands for the sample service's address, which differs on
// every run, wherever the answer names it (a target label, say).
const serviceHost = "sample-service"

var labelValue = regexp.MustCompile(`="(?:[^"\\]|\\.)*"`)

// maskExposition applies the masks above to a text-format answer.
func maskExposition(body, serviceAddr string) string {
	body = strings.ReplaceAll(body, serviceAddr, serviceHost)
	var out strings.Builder
	family := ""
	for line := range strings.Lines(body) {
		line = strings.TrimSuffix(line, "\n")
		if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
			family, _, _ = strings.Cut(rest, " ")
		} else if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			family, _, _ = strings.Cut(rest, " ")
		}
		if hasAnyPrefix(family, droppedPrefixes) {
			continue
		}
		if line != "" && !strings.HasPrefix(line, "#") {
			if hasAnySuffix(family, maskedValueSuffixes) {
				if i := strings.LastIndexByte(line, ' '); i >= 0 {
					line = line[:i+1] + maskedValue
				}
			}
			if hasAnyPrefix(family, maskedLabelFamilies) {
				line = labelValue.ReplaceAllString(line, `="`+maskedValue+`"`)
			}
		}
		out.WriteString(line + "\n")
	}
	return out.String()
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func hasAnySuffix(s string, suffixes []string) bool {
	for _, p := range suffixes {
		if strings.HasSuffix(s, p) {
			return true
		}
	}
	return false
}

// lineDiff lists the lines only in want (-) and only in got (+), in order,
// from a longest common subsequence of the two.
func lineDiff(want, got string) string {
	a, b := strings.Split(want, "\n"), strings.Split(got, "\n")
	// lcs[i][j] is the length of a longest common subsequence of a[i:], b[j:].
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out strings.Builder
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			i, j = i+1, j+1
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			out.WriteString("- " + a[i] + "\n")
			i++
		default:
			out.WriteString("+ " + b[j] + "\n")
			j++
		}
	}
	return out.String()
}

func TestMaskExposition(t *testing.T) {
	in := `# HELP deployment_service_up Up.
# TYPE deployment_service_up gauge
deployment_service_up 1
# HELP deployment_service_scrape_duration_seconds Time.
# TYPE deployment_service_scrape_duration_seconds gauge
deployment_service_scrape_duration_seconds 0.0123
# HELP deployment_service_request_duration_seconds Latency.
# TYPE deployment_service_request_duration_seconds histogram
deployment_service_request_duration_seconds_bucket{endpoint="root",le="0.005"} 3
deployment_service_request_duration_seconds_count{endpoint="root"} 3
# HELP deployment_service_exporter_build_info Build.
# TYPE deployment_service_exporter_build_info gauge
deployment_service_exporter_build_info{goversion="go1.26",version="a \"b\" c"} 1
# HELP go_goroutines Goroutines.
# TYPE go_goroutines gauge
go_goroutines 12
# HELP deployment_service_target_info Target.
# TYPE deployment_service_target_info gauge
deployment_service_target_info{target="http://127.0.0.1:4242/api"} 1
`
	want := `# HELP deployment_service_up Up.
# TYPE deployment_service_up gauge
deployment_service_up 1
# HELP deployment_service_scrape_duration_seconds Time.
# TYPE deployment_service_scrape_duration_seconds gauge
deployment_service_scrape_duration_seconds <varies>
# HELP deployment_service_request_duration_seconds Latency.
# TYPE deployment_service_request_duration_seconds histogram
deployment_service_request_duration_seconds_bucket{endpoint="root",le="0.005"} <varies>
deployment_service_request_duration_seconds_count{endpoint="root"} <varies>
# HELP deployment_service_exporter_build_info Build.
# TYPE deployment_service_exporter_build_info gauge
deployment_service_exporter_build_info{goversion="<varies>",version="<varies>"} 1
# HELP deployment_service_target_info Target.
# TYPE deployment_service_target_info gauge
deployment_service_target_info{target="http://sample-service/api"} 1
`
	if got := maskExposition(in, "127.0.0.1:4242"); got != want {
		t.Errorf("masked:\n%s", lineDiff(want, got))
	}
}

func TestLineDiff(t *testing.T) {
	got := lineDiff("a\nb\nc\nd\ne", "a\nc\nx\nd\nf")
	if want := "- b\n+ x\n- e\n+ f\n"; got != want {
		t.Errorf("diff %q, want %q", got, want)
	}
}
