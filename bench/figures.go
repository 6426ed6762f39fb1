//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

const mb = 1e6 // figures in MB are decimal, as the issue states them

// decodeMBps is the list scanner's throughput on a 1k-entry envelope from
// item 1, in MB/s, used by item 5 to subtract the decoding of the bodies;
// 0 when item 1 did not report it.
var decodeMBps float64

// listDecoding (item 1) runs the client package's decoding benchmarks
// (client/decode_bench_test.go) and compares the streaming scanner with
// json.Unmarshal into []map[string]any on the same bodies.
func listDecoding(t *table, _ *binaries) error {
	matches, _ := filepath.Glob("client/*_test.go")
	results, err := goBench("./client", ".")
	if err != nil {
		return err
	}
	type key struct {
		shape   string
		entries int
	}
	scanner, naive := map[key]benchResult{}, map[key]benchResult{}
	var keys []key
	for _, r := range results {
		c, ok := classifyDecode(r)
		if !ok {
			continue
		}
		k := key{c.shape, c.entries}
		if c.naive {
			naive[k] = r
		} else {
			scanner[k] = r
		}
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b key) int {
		if a.shape != b.shape {
			return cmpString(b.shape, a.shape) // plain before envelope
		}
		return a.entries - b.entries
	})
	found := false
	for _, k := range keys {
		s, okS := scanner[k]
		n, okN := naive[k]
		if !okS || !okN {
			continue
		}
		found = true
		name := fmt.Sprintf("decode %s %s: ", k.shape, entriesName(k.entries))
		speed := n.values["ns/op"] / s.values["ns/op"]
		detail := fmt.Sprintf("%s vs %s ns/op", num(s.values["ns/op"]), num(n.values["ns/op"]))
		if mbps, ok := s.values["MB/s"]; ok {
			detail = fmt.Sprintf("%s vs %s MB/s", num(mbps), num(n.values["MB/s"]))
			if k == (key{"envelope", 1000}) || decodeMBps == 0 {
				decodeMBps = mbps
			}
		}
		t.atLeast("1", name+"throughput ÷ naive", speed, "×", detail, 5)
		alloc := s.values["B/op"] / max(n.values["B/op"], 1)
		t.atMost("1", name+"allocated bytes ÷ naive", alloc, "×",
			fmt.Sprintf("%s vs %s B/op", num(s.values["B/op"]), num(n.values["B/op"])), 0.1)
	}
	for _, shape := range []string{"plain", "envelope"} {
		small, ok1 := scanner[key{shape, 1000}]
		large, ok2 := scanner[key{shape, 100000}]
		if !ok1 || !ok2 {
			continue
		}
		t.atMost("1", fmt.Sprintf("decode %s: bytes allocated, 100k ÷ 1k entries", shape),
			large.values["B/op"]/max(small.values["B/op"], 1), "×",
			fmt.Sprintf("%s vs %s B/op", num(large.values["B/op"]), num(small.values["B/op"])), 1.5)
	}
	gzipPool(t, results)
	if !found {
		t.add(row{item: "1", figure: "list decoding vs json.Unmarshal",
			measured: fmt.Sprintf("no decoding benchmarks found in ./client (%d test files)", len(matches)),
			target:   "≥ 5× throughput, ≤ 0.1× bytes", status: statusNA})
	}
	return nil
}

// gzipPool compares the client's pooled decompressor with a new gzip.Reader
// per answer on a detail view, the first size of BenchmarkGunzip
// (client/gzip_test.go): the pool stays only while it is faster there.
func gzipPool(t *table, results []benchResult) {
	for _, pooled := range results {
		name, ok := strings.CutSuffix(pooled.name, "/pooled=true")
		fresh, found := findBench(results, name+"/pooled=false")
		if !ok || !found || !strings.HasPrefix(name, "BenchmarkGunzip/") {
			continue
		}
		p, f := pooled.values, fresh.values
		t.atMost("1", "gunzip of a "+strings.TrimPrefix(name, "BenchmarkGunzip/")+" detail view: time pooled ÷ a new reader each",
			p["ns/op"]/f["ns/op"], "×", fmt.Sprintf("%s vs %s µs, %s vs %s B/op", num(p["ns/op"]/1e3), num(f["ns/op"]/1e3), num(p["B/op"]), num(f["B/op"])), 1)
		return
	}
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func entriesName(n int) string {
	switch {
	case n >= 1000000 && n%1000000 == 0:
		return strconv.Itoa(n/1000000) + "M"
	case n >= 1000 && n%1000 == 0:
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}

// peakMemory (item 2) starts the exporter against plain lists of 1k and
// 100k locations, scrapes each three times and reads the process's peak
// resident set (VmHWM).
func peakMemory(t *table, b *binaries) error {
	peaks := map[int]int64{}
	var bodySize int64
	for _, n := range []int{1000, 100000} {
		api, err := startFakeAPI(b.fakeapi, "-locations", strconv.Itoa(n), "-page-size", "0")
		if err != nil {
			return err
		}
		if n == 100000 {
			if bodySize, err = listBytes(api); err != nil {
				api.stop()
				return err
			}
		}
		// The default limit, 64MiB, is close to the 100k body of the sample
		// service; memory does not depend on the limit, the body is streamed.
		e, err := startExporter(b.exporter, b.tmp, api, "--api.max-response-bytes=256MiB")
		if err != nil {
			api.stop()
			return err
		}
		for range 3 {
			s, err := e.scrape(context.Background())
			if err == nil && s.locations != float64(n) {
				err = fmt.Errorf("counted %v locations, want %d", s.locations, n)
			}
			if err != nil {
				e.stop()
				api.stop()
				return err
			}
		}
		peak, _, err := e.memory()
		e.stop()
		api.stop()
		if err != nil {
			return err
		}
		peaks[n] = peak
		logf("item 2: %d locations: VmHWM %d bytes", n, peak)
	}
	t.atMost("2", "peak RSS counting a 100k plain list", float64(peaks[100000])/mb, " MB",
		fmt.Sprintf("body %s MB", num(float64(bodySize)/mb)), 40)
	t.atMost("2", "peak RSS, 100k list − 1k list", float64(peaks[100000]-peaks[1000])/mb, " MB",
		fmt.Sprintf("1k: %s MB", num(float64(peaks[1000])/mb)), 10)
	return nil
}

// listBytes reads the location list of api once and returns its size.
func listBytes(api *fakeAPI) (int64, error) {
	req, _ := http.NewRequest(http.MethodGet, api.URL+"/api/projects/locations/", nil)
	req.Header.Set("Authorization", "Token "+api.Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return io.Copy(io.Discard, resp.Body)
}

// fanOut (item 3) measures the wall time of scrapes against a service that
// takes 50 ms for every answer, with 20 detail views at concurrency 8,
// against the critical path that concurrency allows (see BENCHMARKS.md).
func fanOut(t *table, b *binaries) error {
	const latency = 50 * time.Millisecond
	ids := make([]string, 0, 20)
	for i := 1; i <= 20; i++ {
		ids = append(ids, "--locations.detail-id="+strconv.Itoa(i))
	}
	for _, tc := range []struct {
		name     string
		flags    []string
		critical time.Duration
		requests int64
	}{
		// 3 lists + 20 details, all independent: ceil(23/8) rounds.
		{"explicit ids", ids, 3 * latency, 23},
		// First list page, then ceil(20/8) rounds of details.
		{"detail-limit", []string{"--locations.detail-limit=20"}, latency + 3*latency, 23},
	} {
		api, err := startFakeAPI(b.fakeapi, "-locations", "300", "-page-size", "100", "-latency", latency.String())
		if err != nil {
			return err
		}
		e, err := startExporter(b.exporter, b.tmp, api, append([]string{"--api.concurrency=8"}, tc.flags...)...)
		if err != nil {
			api.stop()
			return err
		}
		walls, err := scrapeTimes(e, 3, 15)
		if err == nil {
			err = api.reset()
		}
		var st serviceStats
		if err == nil {
			if _, err = e.scrape(context.Background()); err == nil {
				st, err = api.stats()
			}
		}
		e.stop()
		api.stop()
		if err != nil {
			return err
		}
		if st.Total != tc.requests || st.MaxInFlight > 8 {
			return fmt.Errorf("fan-out %s: %d requests per scrape (want %d), %d in flight at most (want ≤ 8)", tc.name, st.Total, tc.requests, st.MaxInFlight)
		}
		m := median(walls)
		t.atMost("3", "fan-out, "+tc.name+": scrape wall ÷ critical path", float64(m)/float64(tc.critical), "×",
			fmt.Sprintf("median %s of %d scrapes vs %s", m.Round(100*time.Microsecond), len(walls), tc.critical), 1.2)
	}
	return nil
}

// scrapeTimes scrapes e warm times, then returns the wall times of n more.
func scrapeTimes(e *exporter, warm, n int) ([]time.Duration, error) {
	var walls []time.Duration
	for i := range warm + n {
		s, err := e.scrape(context.Background())
		if err != nil {
			return nil, err
		}
		if i >= warm {
			walls = append(walls, s.wall)
		}
	}
	return walls, nil
}

// serviceSize (item 4) runs three exporters side by side against services
// of 1k, 100k and 1M locations (envelopes of 100 that carry count, detail
// views of the first 5 locations), scrapes them in turn and compares
// requests and exporter CPU per scrape.
func serviceSize(t *table, b *binaries) error {
	const warm, rounds = 10, 300
	sizes := []int{1000, 100000, 1000000}
	type pair struct {
		api *fakeAPI
		e   *exporter
	}
	pairs := make([]pair, len(sizes))
	defer func() {
		for _, p := range pairs {
			if p.e != nil {
				p.e.stop()
			}
			if p.api != nil {
				p.api.stop()
			}
		}
	}()
	for i, n := range sizes {
		api, err := startFakeAPI(b.fakeapi, "-locations", strconv.Itoa(n), "-page-size", "100")
		if err != nil {
			return err
		}
		pairs[i].api = api
		if pairs[i].e, err = startExporter(b.exporter, b.tmp, api, "--locations.detail-limit=5"); err != nil {
			return err
		}
	}
	cpu0 := make([]time.Duration, len(sizes))
	for r := range warm + rounds {
		for i, p := range pairs {
			if r == warm {
				if err := p.api.reset(); err != nil {
					return err
				}
				var err error
				if cpu0[i], err = p.e.cpu(); err != nil {
					return err
				}
			}
			s, err := p.e.scrape(context.Background())
			if err == nil && s.locations != float64(sizes[i]) {
				err = fmt.Errorf("counted %v locations, want %d", s.locations, sizes[i])
			}
			if err != nil {
				return err
			}
		}
	}
	reqs := make([]float64, len(sizes))
	cpus := make([]float64, len(sizes))
	for i, p := range pairs {
		st, err := p.api.stats()
		if err != nil {
			return err
		}
		cpu, err := p.e.cpu()
		if err != nil {
			return err
		}
		reqs[i] = float64(st.Total) / rounds
		cpus[i] = float64(cpu-cpu0[i]) / rounds / float64(time.Millisecond)
		logf("item 4: %d locations: %.2f requests/scrape, %.3f ms CPU/scrape", sizes[i], reqs[i], cpus[i])
	}
	for i := 1; i < len(sizes); i++ {
		t.exactly("4", fmt.Sprintf("requests per scrape, %s ÷ 1k locations", entriesName(sizes[i])), reqs[i]/reqs[0], "×",
			fmt.Sprintf("%s vs %s", num(reqs[i]), num(reqs[0])), 1)
	}
	for i := 1; i < len(sizes); i++ {
		t.atMost("4", fmt.Sprintf("exporter CPU per scrape, %s ÷ 1k locations", entriesName(sizes[i])), cpus[i]/cpus[0], "×",
			fmt.Sprintf("%s vs %s ms", num(cpus[i]), num(cpus[0])), 1.2)
	}
	return nil
}

// sharedPolls (item 5) sends bursts of 20 concurrent scrapes and counts the
// polls that reach the service, then measures the exporter's CPU over 200
// sequential scrapes at the default settings.
func sharedPolls(t *table, b *binaries) error {
	if err := concurrentScrapes(t, b); err != nil {
		return err
	}
	return sequentialScrapes(t, b)
}

func concurrentScrapes(t *table, b *binaries) error {
	const bursts, scrapes = 5, 20
	api, err := startFakeAPI(b.fakeapi, "-page-size", "50", "-latency", "50ms")
	if err != nil {
		return err
	}
	defer api.stop()
	e, err := startExporter(b.exporter, b.tmp, api)
	if err != nil {
		return err
	}
	defer e.stop()
	if err := api.reset(); err != nil {
		return err
	}
	if _, err := e.scrape(context.Background()); err != nil {
		return err
	}
	one, err := api.stats()
	if err != nil {
		return err
	}
	worst, worstReqs := 0.0, int64(0)
	for range bursts {
		if err := api.reset(); err != nil {
			return err
		}
		var wg sync.WaitGroup
		errs := make(chan error, scrapes)
		start := make(chan struct{})
		for range scrapes {
			wg.Go(func() {
				<-start
				if _, err := e.scrape(context.Background()); err != nil {
					errs <- err
				}
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			return err
		}
		st, err := api.stats()
		if err != nil {
			return err
		}
		// Every poll asks for the root once.
		worst = max(worst, float64(st.ByEndpoint["root"]))
		worstReqs = max(worstReqs, st.Total)
	}
	t.exactly("5", fmt.Sprintf("polls per burst of %d concurrent scrapes", scrapes), worst, "",
		fmt.Sprintf("worst of %d bursts; %d requests vs %d for one scrape", bursts, worstReqs, one.Total), 1)
	return nil
}

func sequentialScrapes(t *table, b *binaries) error {
	const warm, n = 20, 200
	// The demo's service: 5 projects, 300 locations in envelopes of 50,
	// 5–25 ms per answer.
	api, err := startFakeAPI(b.fakeapi, "-page-size", "50", "-latency", "5ms", "-jitter", "20ms")
	if err != nil {
		return err
	}
	defer api.stop()
	e, err := startExporter(b.exporter, b.tmp, api)
	if err != nil {
		return err
	}
	defer e.stop()
	// Side by side, an exporter with no target: its /metrics holds only the
	// go_*, process_*, promhttp_* and build metrics, the floor of any
	// exporter built on client_golang.
	modules := filepath.Join(b.tmp, "modules.yml")
	if err := os.WriteFile(modules, []byte("modules:\n  default:\n    targets: [\"http://127.0.0.1:*\"]\n    http_client_config: {authorization: {type: Token, credentials: unused}}\n"), 0o600); err != nil {
		return err
	}
	base, err := launchExporter(b.exporter, b.tmp, nil, "--config.file="+modules)
	if err != nil {
		return err
	}
	defer base.stop()
	both := func(k int) error {
		for range k {
			if _, err := e.scrape(context.Background()); err != nil {
				return err
			}
			if _, err := base.scrapeAny(context.Background()); err != nil {
				return err
			}
		}
		return nil
	}
	if err := both(warm); err != nil {
		return err
	}
	bodies, err := pollBytes(api)
	if err != nil {
		return err
	}
	cpu0, err := e.cpu()
	if err != nil {
		return err
	}
	base0, err := base.cpu()
	if err != nil {
		return err
	}
	if err := both(n); err != nil {
		return err
	}
	cpu1, err := e.cpu()
	if err != nil {
		return err
	}
	base1, err := base.cpu()
	if err != nil {
		return err
	}
	perScrape := float64(cpu1-cpu0) / n / float64(time.Millisecond)
	floor := float64(base1-base0) / n / float64(time.Millisecond)
	decode := 0.0
	detail := fmt.Sprintf("%s ms gross, %d scrapes; no decode throughput from item 1, nothing subtracted", num(perScrape), n)
	if decodeMBps > 0 {
		decode = float64(bodies) / mb / decodeMBps * 1e3
		detail = fmt.Sprintf("%s ms gross − %s ms decoding %s kB of bodies, %d scrapes", num(perScrape), num(decode), num(float64(bodies)/1e3), n)
	}
	bare, err := barePolls(api, warm, n)
	if err != nil {
		return err
	}
	// The floor any exporter of this service pays, measured side by side:
	// client_golang's own /metrics plus a bare client sending the same
	// three requests. An absolute target would hold every machine to the
	// one it was set on.
	t.atMost("5", "exporter CPU per sequential scrape beyond decoding ÷ floor", (perScrape-decode)/(floor+bare), "×",
		fmt.Sprintf("%s; floor %s ms = %s (exporter without target) + %s (bare client)", detail, num(floor+bare), num(floor), num(bare)), 1.25)
	t.add(row{item: "5", figure: "… of which the /metrics floor (exporter without target)",
		measured: num(floor) + " ms (go_*, process_*, gzip; side by side)", target: "informational", status: statusNA})
	t.add(row{item: "5", figure: "… and the poll (gross − floor − decoding)",
		measured: num(perScrape-floor-decode) + " ms", target: "informational", status: statusNA})
	t.add(row{item: "5", figure: "reference: bare net/http client, same 3 GETs",
		measured: num(bare) + " ms per poll (this process, no decoding)", target: "informational", status: statusNA})
	return nil
}

// barePolls is the floor of the poll: the CPU this process spends per
// poll when it sends the same three requests concurrently with a plain
// net/http client and discards the bodies.
func barePolls(api *fakeAPI, warm, n int) (float64, error) {
	c := &http.Client{}
	defer c.CloseIdleConnections()
	get := func(path string) error {
		req, _ := http.NewRequest(http.MethodGet, api.URL+path, nil)
		req.Header.Set("Authorization", "Token "+api.Key)
		req.Header.Set("Accept", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return err
	}
	poll := func() error {
		paths := []string{"/api/", "/api/projects/projects/", "/api/projects/locations/"}
		errs := make([]error, len(paths))
		var wg sync.WaitGroup
		for i, p := range paths {
			wg.Go(func() { errs[i] = get(p) })
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	var cpu0 time.Duration
	for i := range warm + n {
		if i == warm {
			var err error
			if cpu0, err = processCPU(os.Getpid()); err != nil {
				return 0, err
			}
		}
		if err := poll(); err != nil {
			return 0, err
		}
	}
	cpu1, err := processCPU(os.Getpid())
	if err != nil {
		return 0, err
	}
	return float64(cpu1-cpu0) / float64(n) / float64(time.Millisecond), nil
}

// pollBytes is the size of the bodies one poll at the default settings
// reads: the root, the project list and the first page of locations (the
// envelope carries count, and no detail view is wanted).
func pollBytes(api *fakeAPI) (int64, error) {
	var total int64
	for _, p := range []string{"/api/", "/api/projects/projects/", "/api/projects/locations/"} {
		req, _ := http.NewRequest(http.MethodGet, api.URL+p, nil)
		req.Header.Set("Authorization", "Token "+api.Key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		n, err := io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// exposition (item 6) runs BenchmarkExposition of the collector package.
func exposition(t *table, _ *binaries) error {
	results, err := goBench("./collector", "^BenchmarkExposition$", "-benchtime", "2s")
	if err != nil {
		return err
	}
	small, ok1 := findBench(results, "BenchmarkExposition/locations=100")
	large, ok2 := findBench(results, "BenchmarkExposition/locations=1000")
	if !ok1 || !ok2 {
		return fmt.Errorf("BenchmarkExposition/locations=100 and =1000 not found")
	}
	t.atMost("6", "gather+encode, time per location (1000 locations)", large.values["ns/location"]/1e3, " µs",
		fmt.Sprintf("%s ms per scrape, %s series", num(large.values["ns/op"]/1e6), num(large.values["series"])), 100)
	t.atMost("6", "allocated bytes per series (1000 locations)", large.values["B/series"], " B",
		fmt.Sprintf("%s allocs/series", num(large.values["allocs/series"])), 1024)
	t.atMost("6", "bytes per series, 1000 ÷ 100 locations", large.values["B/series"]/small.values["B/series"], "×",
		fmt.Sprintf("%s vs %s B/series", num(large.values["B/series"]), num(small.values["B/series"])), 1.25)
	return nil
}
