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
	"time"

	"github.com/deployment-service/deployment_service_exporter/sampleservice"
)

// Stats is what GET /stats answers.
type Stats struct {
	Total       int64            `json:"total"`
	ByEndpoint  map[string]int64 `json:"by_endpoint"`
	MaxInFlight int64            `json:"max_in_flight"`
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
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "fakeapi:", err)
		os.Exit(1)
	}
}

func run(o sampleservice.Options) error {
	api, err := sampleservice.Start(o)
	if err != nil {
		return err
	}
	defer api.Close()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	svc := api.Service
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		st := Stats{Total: svc.TotalRequests(), MaxInFlight: svc.MaxInFlight(), ByEndpoint: map[string]int64{}}
		for _, ep := range []string{sampleservice.EndpointRoot, sampleservice.EndpointProjects, sampleservice.EndpointLocations, sampleservice.EndpointLocationDetail} {
			st.ByEndpoint[ep] = svc.Requests(ep)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(st)
	})
	mux.HandleFunc("POST /reset", func(w http.ResponseWriter, _ *http.Request) {
		svc.ResetStats()
		w.WriteHeader(http.StatusNoContent)
	})
	ctl := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = ctl.Serve(ln) }()
	defer ctl.Close()

	line, _ := json.Marshal(map[string]string{"url": api.URL(), "key": svc.Key(), "control": "http://" + ln.Addr().String()})
	fmt.Println(string(line))

	// The parent ends the service by closing stdin (or killing it), so a
	// crashed benchmark leaves no service behind.
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}
