//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// benchResult is one line of `go test -bench` output: the benchmark's name
// without the GOMAXPROCS suffix, and its values by unit (ns/op, B/op,
// allocs/op, MB/s and any custom unit).
type benchResult struct {
	name   string
	values map[string]float64
}

var procsSuffix = regexp.MustCompile(`-\d+$`)

// goBench runs the benchmarks of pkg matching pattern with -benchmem and
// returns their results; the raw output is copied to the verbose log.
func goBench(pkg, pattern string, extra ...string) ([]benchResult, error) {
	args := append([]string{"test", pkg, "-run", "^$", "-bench", pattern, "-benchmem", "-count", "1"}, extra...)
	cmd := exec.Command("go", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	logf("$ go %s", strings.Join(args, " "))
	err := cmd.Run()
	logf("%s", out.String())
	if err != nil {
		return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return parseBench(out.String()), nil
}

func parseBench(out string) []benchResult {
	var results []benchResult
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		r := benchResult{name: procsSuffix.ReplaceAllString(f[0], ""), values: map[string]float64{}}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				break
			}
			r.values[f[i+1]] = v
		}
		results = append(results, r)
	}
	return results
}

func findBench(results []benchResult, name string) (benchResult, bool) {
	for _, r := range results {
		if r.name == name {
			return r, true
		}
	}
	return benchResult{}, false
}

// decodeCase is one list decoding benchmark of the client package, as
// classified from its name.
type decodeCase struct {
	shape   string // "plain" or "envelope"
	entries int
	naive   bool // json.Unmarshal into []map[string]any
	result  benchResult
}

var sizeRE = regexp.MustCompile(`(?i)^(?:[a-z_]+[=_-])?(\d+)(k|m)?(?:[_-]?entries)?$`)

// classifyDecode reads shape, size and implementation from a benchmark name
// such as BenchmarkDecodeList/envelope/100k/naive, whatever the order of
// the parts: a part "plain" or "array" or "envelope", a part that is a
// size ("1k", "entries=1000", "100000"), and "naive", "unmarshal" or "map"
// anywhere in the name for the json.Unmarshal baseline.
func classifyDecode(r benchResult) (decodeCase, bool) {
	c := decodeCase{result: r}
	lower := strings.ToLower(r.name)
	c.naive = strings.Contains(lower, "naive") || strings.Contains(lower, "unmarshal") || strings.Contains(lower, "map")
	for _, part := range strings.Split(lower, "/") {
		switch {
		case strings.Contains(part, "envelope") || strings.Contains(part, "paginated"):
			c.shape = "envelope"
		case strings.Contains(part, "plain") || strings.Contains(part, "array"):
			c.shape = "plain"
		}
		if m := sizeRE.FindStringSubmatch(part); m != nil {
			n, _ := strconv.Atoi(m[1])
			switch m[2] {
			case "k":
				n *= 1000
			case "m":
				n *= 1000000
			}
			c.entries = n
		}
	}
	_, hasNs := r.values["ns/op"]
	_, hasBytes := r.values["B/op"]
	return c, c.shape != "" && c.entries > 0 && hasNs && hasBytes
}
