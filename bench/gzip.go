//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"
)

// gzipItem (item 7, issue 8) compares scrapes of a 100k-entry plain list
// served gzip and identity: the bytes on the wire and the exporter's CPU,
// decompression included. Then it measures the exporter's peak memory
// while it refuses a gzip bomb.
func gzipItem(t *table, b *binaries) error {
	if err := gzipVersusIdentity(t, b); err != nil {
		return err
	}
	return gzipBombMemory(t, b)
}

// gzipVersusIdentity runs two exporters side by side against one service
// that compresses when asked: one asks for gzip (the default), the other
// runs with --no-api.gzip. Their scrapes alternate; the service counts the
// bytes it writes for each, and /proc the CPU each exporter uses.
func gzipVersusIdentity(t *table, b *binaries) error {
	const locations, warm, rounds = 100000, 2, 8
	api, err := startFakeAPI(b.fakeapi, "-locations", strconv.Itoa(locations), "-page-size", "0", "-gzip")
	if err != nil {
		return err
	}
	defer api.stop()
	// The 100k body is 56.5 MB, close to the default limit of 64MiB; the
	// limit does not change memory or CPU, the body is streamed.
	names := []string{"gzip", "identity"}
	flags := [][]string{{"--api.max-response-bytes=256MiB"}, {"--api.max-response-bytes=256MiB", "--no-api.gzip"}}
	exporters := make([]*exporter, len(flags))
	defer func() {
		for _, e := range exporters {
			if e != nil {
				e.stop()
			}
		}
	}()
	for i, f := range flags {
		if exporters[i], err = startExporter(b.exporter, b.tmp, api, f...); err != nil {
			return err
		}
	}
	wire := make([]int64, len(exporters))
	cpu := make([]time.Duration, len(exporters))
	for r := range warm + rounds {
		for i, e := range exporters {
			st0, err := api.stats()
			if err != nil {
				return err
			}
			c0, err := e.cpu()
			if err != nil {
				return err
			}
			s, err := e.scrape(context.Background())
			if err == nil && s.locations != locations {
				err = fmt.Errorf("%s: counted %v locations, want %d", names[i], s.locations, locations)
			}
			if err != nil {
				return err
			}
			c1, err := e.cpu()
			if err != nil {
				return err
			}
			st1, err := api.stats()
			if err != nil {
				return err
			}
			if r >= warm {
				wire[i] += st1.BytesSent - st0.BytesSent
				cpu[i] += c1 - c0
			}
		}
	}
	perScrape := func(i int) (bytes, ms float64) {
		return float64(wire[i]) / rounds, float64(cpu[i]) / rounds / float64(time.Millisecond)
	}
	gzBytes, gzCPU := perScrape(0)
	idBytes, idCPU := perScrape(1)
	logf("item 7: gzip %.0f bytes %.1f ms CPU per scrape; identity %.0f bytes %.1f ms", gzBytes, gzCPU, idBytes, idCPU)
	t.atMost("7", "wire bytes per scrape of a 100k plain list, gzip ÷ identity", gzBytes/idBytes, "×",
		fmt.Sprintf("%s vs %s MB, %d scrapes each", num(gzBytes/mb), num(idBytes/mb), rounds), 0.2)
	t.atMost("7", "exporter CPU per scrape of a 100k plain list, gzip ÷ identity", gzCPU/idCPU, "×",
		fmt.Sprintf("%s vs %s ms, decompression included", num(gzCPU), num(idCPU)), 3)
	return nil
}

// gzipBombMemory serves a 4 GiB gzip bomb (about 4 MB compressed) as the
// location list and reads the exporter's peak resident set after three
// scrapes that must each refuse it as too_large.
func gzipBombMemory(t *table, b *binaries) error {
	const bomb = 4 << 30
	api, err := startFakeAPI(b.fakeapi, "-gzip-bomb", strconv.Itoa(bomb))
	if err != nil {
		return err
	}
	defer api.stop()
	e, err := startExporter(b.exporter, b.tmp, api)
	if err != nil {
		return err
	}
	defer e.stop()
	var s scrape
	for range 3 {
		if s, err = e.scrapeAny(context.Background()); err != nil {
			return err
		}
	}
	if s.up != 0 || s.locations != -1 || s.tooLarge != 3 {
		log, _ := os.ReadFile(e.logPath)
		return fmt.Errorf("bomb: up %v, locations %v, %v too_large errors; want 0, absent, 3; exporter log:\n%s", s.up, s.locations, s.tooLarge, log)
	}
	st, err := api.stats()
	if err != nil {
		return err
	}
	peak, _, err := e.memory()
	if err != nil {
		return err
	}
	logf("item 7: bomb refused 3 times, VmHWM %d bytes, service sent %d bytes", peak, st.BytesSent)
	t.atMost("7", "peak RSS while a 4 GiB gzip bomb is refused", float64(peak)/mb, " MB",
		fmt.Sprintf("3 scrapes, each too_large at the 64MiB limit; the service wrote %s MB before the exporter hung up", num(float64(st.BytesSent)/mb)), 40)
	return nil
}
