//go:build linux

package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// hostileService answers as a service that means harm: every list page
// names a 16 KiB next link (same origin, valid), or every answer carries
// headerBytes of headers. It runs in the bench process, not the
// exporter's, so its memory is not counted.
type hostileService struct {
	srv         *http.Server
	URL         string
	headerBytes int
}

func startHostile(headerBytes int) (*hostileService, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := &hostileService{URL: "http://" + ln.Addr().String(), headerBytes: headerBytes}
	h.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = h.srv.Serve(ln) }()
	return h, nil
}

func (h *hostileService) stop() { _ = h.srv.Close() }

// pad makes a next link of 16 KiB, the longest the exporter follows.
var pad = strings.Repeat("p", 16<<10-200)

func (h *hostileService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	for i := 0; i < h.headerBytes; i += 1 << 20 {
		w.Header().Set("X-Pad-"+strconv.Itoa(i>>20), strings.Repeat("h", min(1<<20, h.headerBytes-i)))
	}
	w.Header().Set("Content-Type", "application/json")
	list, ok := strings.CutPrefix(r.URL.Path, "/api/projects/")
	if !ok {
		_, _ = w.Write([]byte(`{}`))
		return
	}
	// No count: the exporter must walk every page to count the entries.
	page, _ := strconv.Atoi(r.URL.Query().Get("page"))
	fmt.Fprintf(w, `{"next": "%s/api/projects/%s?page=%d&pad=%s", "results": [{"id": %d}]}`, h.URL, list, page+1, pad, page)
}

// hostileMemory (item 10, issue 21) measures the exporter's memory while
// a service it polls means harm: 100 polls of a service whose every page
// names a 16 KiB next link, each poll walking both lists to the page
// limit and kept on the recent-polls page; then 40 /probes at once of a
// service whose every answer carries 8 MB of headers.
func hostileMemory(t *table, b *binaries) error {
	if err := longNextLinks(t, b); err != nil {
		return err
	}
	return largeHeaders(t, b)
}

func longNextLinks(t *table, b *binaries) error {
	const polls, maxPages = 100, 100
	h, err := startHostile(0)
	if err != nil {
		return err
	}
	defer h.stop()
	// A page limit of 100 keeps the item short; what a poll keeps stops
	// growing within the first 40 pages.
	e, err := launchExporter(b.exporter, b.tmp, []string{"DEPLOYMENT_SERVICE_API_KEY=hostile-bench-key"}, "--api.url="+h.URL, "--api.max-pages="+strconv.Itoa(maxPages))
	if err != nil {
		return err
	}
	defer e.stop()
	for range polls {
		s, err := e.scrapeAny(context.Background())
		if err != nil {
			return err
		}
		if s.up != 0 {
			return fmt.Errorf("deployment_service_up %v, want 0: the walks must end at the page limit", s.up)
		}
	}
	peak, now, err := e.memory()
	if err != nil {
		return err
	}
	logf("item 10: 100 polls of 16 KiB next links: VmHWM %d, VmRSS %d", peak, now)
	t.atMost("10", "peak RSS, 100 polls of a service naming 16 KiB next links", float64(peak)/mb, " MB",
		fmt.Sprintf("%s MB after; each poll walks both lists to the page limit, %d", num(float64(now)/mb), maxPages), 100)
	return nil
}

func largeHeaders(t *table, b *binaries) error {
	const probes, headerBytes = 40, 8 << 20
	h, err := startHostile(headerBytes)
	if err != nil {
		return err
	}
	defer h.stop()
	dir := filepath.Join(b.tmp, "hostile")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	modules := filepath.Join(dir, "modules.yml")
	if err := os.WriteFile(modules, []byte("modules:\n  default: {timeout: 10s}\n"), 0o600); err != nil {
		return err
	}
	e, err := launchExporter(b.exporter, b.tmp, nil, "--config.file="+modules, "--web.max-requests="+strconv.Itoa(probes))
	if err != nil {
		return err
	}
	defer e.stop()
	// Distinct targets, so that no two probes share a poll: 40 polls at
	// once, each with three answers.
	var wg sync.WaitGroup
	errs := make(chan error, probes)
	for i := range probes {
		wg.Go(func() {
			target := fmt.Sprintf("%s/t%d", h.URL, i)
			body, err := e.get(context.Background(), "/probe?target="+url.QueryEscape(target))
			if err == nil && !strings.Contains(body, `deployment_service_endpoint_failure_info{endpoint="root",reason="too_large"}`) {
				err = fmt.Errorf("probe %d: the root answer is not too_large", i)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	peak, now, err := e.memory()
	if err != nil {
		return err
	}
	logf("item 10: 40 probes of 8 MB headers: VmHWM %d, VmRSS %d", peak, now)
	t.atMost("10", "peak RSS, 40 /probes at once of a service sending 8 MB of headers", float64(peak)/mb, " MB",
		fmt.Sprintf("%s MB after; %d answers, each too_large", num(float64(now)/mb), 3*probes), 100)
	return nil
}
