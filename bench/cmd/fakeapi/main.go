// Command fakeapi serves the sample deployment service on loopback in a
// process of its own, so that benchmarks can measure the exporter's CPU and
// memory apart from the service's. It prints one JSON line to stdout:
//
//	{"url":"http://127.0.0.1:PORT","key":"…","control":"http://127.0.0.1:PORT2"}
//
// url and key configure the exporter (--api.url and
// DEPLOYMENT_SERVICE_API_KEY). With -listeners N > 1 the service also
// answers on N-1 more ports, each a distinct origin for /probe, and the
// line carries all N base URLs as "urls". control serves the service's request
// statistics: GET /stats answers them as JSON, POST /reset zeroes them.
// The process runs until it is killed or its stdin closes.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/deployment-service/deployment_service_exporter/sampleservice"
)

// Stats is what GET /stats answers.
type Stats struct {
	Total       int64            `json:"total"`
	ByEndpoint  map[string]int64 `json:"by_endpoint"`
	MaxInFlight int64            `json:"max_in_flight"`
	BytesSent   int64            `json:"bytes_sent"`
}

func main() {
	var o sampleservice.Options
	flag.IntVar(&o.Locations, "locations", sampleservice.DefaultLocations, "number of locations (negative = none)")
	flag.IntVar(&o.Projects, "projects", sampleservice.DefaultProjects, "number of projects (negative = none)")
	flag.IntVar(&o.PageSize, "page-size", 0, "0 serves plain arrays, N > 0 envelopes of N entries")
	flag.BoolVar(&o.OmitCount, "omit-count", false, "leave count out of envelopes")
	flag.DurationVar(&o.Latency, "latency", 0, "delay of every answer")
	flag.DurationVar(&o.Jitter, "jitter", 0, "uniformly random extra delay in [0, jitter)")
	flag.StringVar(&o.Key, "key", "bench-key-5f0c9a", "API key")
	flag.Int64Var(&o.Seed, "seed", 1, "seed of the generated data")
	flag.BoolVar(&o.Gzip, "gzip", false, "compress answers for clients that ask for gzip")
	flag.BoolVar(&o.LinkHeader, "link-header", false, "with -page-size, page plain arrays with Link headers")
	flag.BoolVar(&o.OmitIDs, "omit-ids", false, "entries carry a url and no id")
	bomb := flag.Int64("gzip-bomb", 0, "answer the location list with a gzip bomb inflating to this many bytes (0 = none)")
	listeners := flag.Int("listeners", 1, "serve the same service on this many loopback ports, each a distinct origin")
	flag.Parse()
	if err := run(o, *bomb, max(*listeners, 1)); err != nil {
		fmt.Fprintln(os.Stderr, "fakeapi:", err)
		os.Exit(1)
	}
}

func run(o sampleservice.Options, bomb int64, listeners int) error {
	svc := sampleservice.New(o)
	if bomb > 0 {
		svc.SetFault(sampleservice.EndpointLocations, sampleservice.Fault{GzipBomb: bomb})
	}
	// The service runs on listeners of its own that count the bytes
	// written to each connection: the bytes on the wire.
	var sent atomic.Int64
	api := &http.Server{Handler: svc, ReadHeaderTimeout: 10 * time.Second}
	defer api.Close()
	urls := make([]string, 0, listeners)
	for range listeners {
		apiLn, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		go func() { _ = api.Serve(&countingListener{Listener: apiLn, sent: &sent}) }()
		urls = append(urls, "http://"+apiLn.Addr().String()+svc.Prefix())
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		st := Stats{Total: svc.TotalRequests(), MaxInFlight: svc.MaxInFlight(), ByEndpoint: map[string]int64{}, BytesSent: sent.Load()}
		for _, ep := range []string{sampleservice.EndpointRoot, sampleservice.EndpointProjects, sampleservice.EndpointLocations, sampleservice.EndpointLocationDetail} {
			st.ByEndpoint[ep] = svc.Requests(ep)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(st)
	})
	mux.HandleFunc("POST /reset", func(w http.ResponseWriter, _ *http.Request) {
		svc.ResetStats()
		sent.Store(0)
		w.WriteHeader(http.StatusNoContent)
	})
	ctl := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = ctl.Serve(ln) }()
	defer ctl.Close()

	info := map[string]any{"url": urls[0], "key": svc.Key(), "control": "http://" + ln.Addr().String()}
	if listeners > 1 {
		info["urls"] = urls
	}
	line, _ := json.Marshal(info)
	fmt.Println(string(line))

	// The parent ends the service by closing stdin (or killing it), so a
	// crashed benchmark leaves no service behind.
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// countingListener counts the bytes written to the connections it accepts.
type countingListener struct {
	net.Listener
	sent *atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, sent: l.sent}, nil
}

type countingConn struct {
	net.Conn
	sent *atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.sent.Add(int64(n))
	return n, err
}
