//go:build linux

// Command bench runs the exporter's performance suite (issues 4 and 8) and prints
// one table: each figure, what was measured, its target, the ratio of the
// two and whether the target is met. Run it from the repository with
//
//	make bench        # or: go run ./bench
//
// It runs the Go benchmarks of list decoding (./client) and exposition
// (./collector), builds the release binary with scripts/build.sh and the
// sample service as a process of its own (bench/cmd/fakeapi), and measures
// the exporter process itself: peak memory, fan-out wall time, CPU per
// scrape and the load that concurrent scrapes put on the service.
// BENCHMARKS.md explains every figure. Everything listens on 127.0.0.1.
package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

var logOut io.Writer = io.Discard

func logf(format string, args ...any) { fmt.Fprintf(logOut, format+"\n", args...) }

func main() {
	verbose := flag.Bool("v", false, "print the output of every step to stderr")
	output := flag.String("o", "", "also write the report (machine, command, table) to this file as Markdown")
	items := flag.String("items", "1,2,3,4,5,6,7,8,9,10", "comma-separated items to run (1–6 from issue 4, 7 gzip from issue 8, 8 /probe targets from issue 9, 9 detail subsets in turns from issue 15, 10 a hostile service from issue 21)")
	flag.Parse()
	if *verbose {
		logOut = os.Stderr
	}
	if err := run(*output, strings.Split(*items, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(output string, items []string) error {
	start := time.Now()
	if err := chdirToModule(); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "deployment-service-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	progress("building the exporter (scripts/build.sh) and bench/cmd/fakeapi")
	bins, err := build(tmp)
	if err != nil {
		return err
	}

	var t table
	steps := []struct {
		item, what string
		run        func(*table, *binaries) error
	}{
		{"1", "list decoding (go test ./client)", listDecoding},
		{"2", "peak memory of the daemon", peakMemory},
		{"3", "fan-out against a 50 ms service", fanOut},
		{"4", "size of the service", serviceSize},
		{"5", "shared polls and CPU per scrape", sharedPolls},
		{"6", "exposition (go test ./collector)", exposition},
		{"7", "gzip: wire bytes, CPU and a gzip bomb", gzipItem},
		{"8", "1,000 /probe targets: files, goroutines, memory", probeCosts},
		{"9", "detail subsets checked in turns", detailTurns},
		{"10", "memory against a hostile service", hostileMemory},
	}
	for _, s := range steps {
		if !slices.Contains(items, s.item) {
			continue
		}
		progress("item %s: %s", s.item, s.what)
		if err := s.run(&t, bins); err != nil {
			t.add(row{item: s.item, figure: s.what, measured: "error: " + firstLine(err.Error()), status: statusFail})
			fmt.Fprintf(os.Stderr, "item %s failed: %v\n", s.item, err)
		}
	}

	report := header(time.Since(start)) + "\n" + t.markdown()
	fmt.Print("\n" + report)
	if output != "" {
		if err := os.WriteFile(output, []byte(report), 0o644); err != nil {
			return err
		}
	}
	if t.failed() {
		return fmt.Errorf("%d figure(s) miss their target", t.failures())
	}
	return nil
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// chdirToModule moves to the module root, where scripts/ and go.mod are.
func chdirToModule() error {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return fmt.Errorf("run bench inside the exporter's module")
	}
	return os.Chdir(filepath.Dir(mod))
}

type binaries struct {
	exporter, fakeapi, tmp string
}

func build(tmp string) (*binaries, error) {
	b := &binaries{
		exporter: filepath.Join(tmp, "deployment_service_exporter"),
		fakeapi:  filepath.Join(tmp, "fakeapi"),
		tmp:      tmp,
	}
	cmd := exec.Command("./scripts/build.sh")
	cmd.Env = append(os.Environ(), "OUTPUT="+b.exporter)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("scripts/build.sh: %w\n%s", err, out)
	}
	if out, err := exec.Command("go", "build", "-o", b.fakeapi, "./bench/cmd/fakeapi").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build ./bench/cmd/fakeapi: %w\n%s", err, out)
	}
	return b, nil
}

// header describes the machine and the run.
func header(took time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Command: `make bench` (go run ./bench), %s, took %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), took.Round(time.Second))
	fmt.Fprintf(&b, "Machine: %d CPUs (nproc), %s, %s, %s/%s", runtime.NumCPU(), cpuModel(), goVersion(), runtime.GOOS, runtime.GOARCH)
	if rev, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		fmt.Fprintf(&b, ", commit %s", strings.TrimSpace(string(rev)))
		if out, _ := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); len(out) > 0 {
			b.WriteString(" with local changes")
		}
	}
	b.WriteString("\n")
	return b.String()
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for line := range strings.Lines(string(b)) {
		if name, value, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(name) == "model name" {
			return strings.TrimSpace(value)
		}
	}
	return "unknown CPU"
}

func goVersion() string {
	out, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		return runtime.Version()
	}
	return strings.TrimSpace(string(out))
}

const (
	statusPass = "pass"
	statusFail = "FAIL"
	statusNA   = "n/a"
)

// row is one figure of the table.
type row struct {
	item, figure, measured, target string
	ratio                          float64 // measured ÷ target; NaN when there is none
	status                         string
}

type table struct{ rows []row }

func (t *table) add(r row) {
	if r.ratio == 0 && r.status != statusPass {
		r.ratio = math.NaN()
	}
	t.rows = append(t.rows, r)
}

// atMost adds a figure whose target is an upper bound.
func (t *table) atMost(item, figure string, v float64, unit, detail string, limit float64) {
	t.bound(item, figure, v, unit, detail, limit, "≤", v <= limit)
}

// atLeast adds a figure whose target is a lower bound.
func (t *table) atLeast(item, figure string, v float64, unit, detail string, limit float64) {
	t.bound(item, figure, v, unit, detail, limit, "≥", v >= limit)
}

// exactly adds a figure that must equal its target.
func (t *table) exactly(item, figure string, v float64, unit, detail string, want float64) {
	t.bound(item, figure, v, unit, detail, want, "=", v == want)
}

func (t *table) bound(item, figure string, v float64, unit, detail string, limit float64, op string, ok bool) {
	measured := num(v) + unit
	if detail != "" {
		measured += " (" + detail + ")"
	}
	status := statusFail
	if ok {
		status = statusPass
	}
	t.rows = append(t.rows, row{item: item, figure: figure, measured: measured, target: op + " " + num(limit) + unit, ratio: v / limit, status: status})
}

func (t *table) failures() int {
	n := 0
	for _, r := range t.rows {
		if r.status == statusFail {
			n++
		}
	}
	return n
}

func (t *table) failed() bool { return t.failures() > 0 }

func (t *table) markdown() string {
	cells := [][]string{{"#", "figure", "measured", "target", "ratio", "result"}}
	for _, r := range t.rows {
		ratio := "–"
		if !math.IsNaN(r.ratio) && !math.IsInf(r.ratio, 0) {
			ratio = fmt.Sprintf("%.2f", r.ratio)
		}
		cells = append(cells, []string{r.item, r.figure, r.measured, r.target, ratio, r.status})
	}
	width := make([]int, len(cells[0]))
	for _, c := range cells {
		for i, s := range c {
			width[i] = max(width[i], len([]rune(s)))
		}
	}
	var b strings.Builder
	line := func(c []string) {
		b.WriteString("|")
		for i, s := range c {
			fmt.Fprintf(&b, " %s%s |", s, strings.Repeat(" ", width[i]-len([]rune(s))))
		}
		b.WriteString("\n")
	}
	line(cells[0])
	sep := make([]string, len(width))
	for i, w := range width {
		sep[i] = strings.Repeat("-", w)
	}
	line(sep)
	for _, c := range cells[1:] {
		line(c)
	}
	fmt.Fprintf(&b, "\n%d figures: %d pass, %d fail, %d n/a\n", len(t.rows), t.count(statusPass), t.count(statusFail), t.count(statusNA))
	return b.String()
}

func (t *table) count(status string) int {
	n := 0
	for _, r := range t.rows {
		if r.status == status {
			n++
		}
	}
	return n
}

// num prints a value with three significant digits, without exponent for
// the magnitudes of this table.
func num(v float64) string {
	a := math.Abs(v)
	switch {
	case a == 0 || a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// median returns the middle of ds, which it leaves unchanged.
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	return sorted[len(sorted)/2]
}
