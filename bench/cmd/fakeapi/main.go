// Command fakeapi serves the sample deployment service on loopback in a
// process of its own, so that benchmarks can measure the exporter's CPU and
// memory apart from the service's. It prints one JSON line to stdout:
//
//	{"url":"http://127.0.0.1:PORT","key":"…","control":"http://127.0.0.1:PORT2"}
//
// url and key configure the exporter (--api.url and
// DEPLOYMENT_SERVICE_API_KEY). control serves the service's request
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
	flag.Parse()
	if err := run(o, *bomb); err != nil {
		fmt.Fprintln(os.Stderr, "fakeapi:", err)
		os.Exit(1)
	}
}

func run(o sampleservice.Options, bomb int64) error {
	svc := sampleservice.New(o)
	if bomb > 0 {
		svc.SetFault(sampleservice.EndpointLocations, sampleservice.Fault{GzipBomb: bomb})
	}
	// The service runs on a listener of its own that counts the bytes
	// written to each connection: the bytes on the wire.
	apiLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	counted := &countingListener{Listener: apiLn}
	api := &http.Server{Handler: svc, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = api.Serve(counted) }()
	defer api.Close()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		st := Stats{Total: svc.TotalRequests(), MaxInFlight: svc.MaxInFlight(), ByEndpoint: map[string]int64{}, BytesSent: counted.sent.Load()}
		for _, ep := range []string{sampleservice.EndpointRoot, sampleservice.EndpointProjects, sampleservice.EndpointLocations, sampleservice.EndpointLocationDetail} {
			st.ByEndpoint[ep] = svc.Requests(ep)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(st)
	})
	mux.HandleFunc("POST /reset", func(w http.ResponseWriter, _ *http.Request) {
		svc.ResetStats()
		counted.sent.Store(0)
		w.WriteHeader(http.StatusNoContent)
	})
	ctl := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = ctl.Serve(ln) }()
	defer ctl.Close()

	line, _ := json.Marshal(map[string]string{"url": "http://" + apiLn.Addr().String() + svc.Prefix(), "key": svc.Key(), "control": "http://" + ln.Addr().String()})
	fmt.Println(string(line))

	// The parent ends the service by closing stdin (or killing it), so a
	// crashed benchmark leaves no service behind.
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// countingListener counts the bytes written to the connections it accepts.
type countingListener struct {
	net.Listener
	sent atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, sent: &l.sent}, nil
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
