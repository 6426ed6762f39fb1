package client

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/config"
)

// connServer is a service on 127.0.0.1 that counts the connections open
// to it, as the server sees them, and answers the API root with an empty
// object once gate lets it (nil: at once).
type connServer struct {
	srv  *httptest.Server
	gate chan struct{}

	mu      sync.Mutex
	live    int
	opened  int
	arrived int
	changed chan struct{} // closed and replaced on every change
}

func newConnServer(t *testing.T, gate chan struct{}) *connServer {
	t.Helper()
	s := &connServer{gate: gate, changed: make(chan struct{})}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.update(func() { s.arrived++ })
		if s.gate != nil {
			<-s.gate
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("{}"))
	}))
	s.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			s.update(func() { s.live++; s.opened++ })
		case http.StateClosed, http.StateHijacked:
			s.update(func() { s.live-- })
		}
	}
	s.srv.Start()
	t.Cleanup(s.srv.Close)
	return s
}

func (s *connServer) update(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
	close(s.changed)
	s.changed = make(chan struct{})
}

// waitFor waits until cond holds of the server's counts; it fails the
// test after a long while, which only a broken transport takes.
func (s *connServer) waitFor(t *testing.T, what string, cond func(live, opened, arrived int) bool) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		s.mu.Lock()
		live, opened, arrived, changed := s.live, s.opened, s.arrived, s.changed
		s.mu.Unlock()
		if cond(live, opened, arrived) {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("%s: still %d connections open (%d opened), %d requests arrived", what, live, opened, arrived)
		}
	}
}

func (s *connServer) liveIs(t *testing.T, want int, what string) {
	t.Helper()
	s.waitFor(t, what, func(live, _, _ int) bool { return live == want })
}

func (s *connServer) counts() (live, opened int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live, s.opened
}

func sharedTransport(t *testing.T) *Transport {
	t.Helper()
	tr, err := NewTransport(config.HTTPClientConfig{
		Authorization: &config.Authorization{Type: "Token", Credentials: testKey},
	}, "")
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func transportClient(t *testing.T, tr *Transport, base string) *Client {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(Config{BaseURL: u, Transport: tr, Concurrency: 8})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// rootsAtOnce sends n root requests that the server holds until all n
// have arrived, so that each needs a connection of its own.
func rootsAtOnce(t *testing.T, c *Client, s *connServer, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			if res := c.Root(context.Background()); res.Err != nil {
				errs <- res.Err
			}
		})
	}
	s.waitFor(t, "requests arriving", func(_, _, arrived int) bool { return arrived >= n })
	close(s.gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestTransportKeepsOneIdleConnectionPerTarget(t *testing.T) {
	s := newConnServer(t, make(chan struct{}))
	c := transportClient(t, sharedTransport(t), s.srv.URL)
	defer c.Close()
	rootsAtOnce(t, c, s, 4)
	if _, opened := s.counts(); opened != 4 {
		t.Fatalf("%d connections opened for 4 requests at once, want 4", opened)
	}
	if kept := c.lease.t.count(); kept != 1 {
		t.Errorf("%d connections kept, want 1", kept)
	}
	s.liveIs(t, 1, "after the requests")
	// The one kept is reused.
	if res := c.Root(context.Background()); res.Err != nil {
		t.Fatal(res.Err)
	}
	if live, opened := s.counts(); live != 1 || opened != 4 {
		t.Errorf("after one more request: %d open, %d opened; want the idle connection reused", live, opened)
	}
}

func TestClosedClientClosesItsConnectionsAtOnce(t *testing.T) {
	tr := sharedTransport(t)
	a, b := newConnServer(t, nil), newConnServer(t, nil)
	ca, cb := transportClient(t, tr, a.srv.URL), transportClient(t, tr, b.srv.URL)
	defer cb.Close()
	for _, c := range []*Client{ca, cb} {
		if res := c.Root(context.Background()); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	a.liveIs(t, 1, "a after its request")
	b.liveIs(t, 1, "b after its request")
	ca.Close()
	a.liveIs(t, 0, "a after its client closed")
	if live, _ := b.counts(); live != 1 {
		t.Errorf("closing a's client left b with %d connections, want its 1", live)
	}
	ca.Close() // idempotent
	if res := cb.Root(context.Background()); res.Err != nil {
		t.Fatal(res.Err)
	}
	if _, opened := b.counts(); opened != 1 {
		t.Errorf("b opened %d connections, want its idle one reused", opened)
	}
}

// A client closed while its request is in flight lets the request finish
// and closes the connection as it ends.
func TestClientClosedInFlightClosesWhenTheRequestEnds(t *testing.T) {
	s := newConnServer(t, make(chan struct{}))
	c := transportClient(t, sharedTransport(t), s.srv.URL)
	done := make(chan Result)
	go func() { done <- c.Root(context.Background()) }()
	s.waitFor(t, "the request arriving", func(_, _, arrived int) bool { return arrived == 1 })
	c.Close()
	if live, _ := s.counts(); live != 1 {
		t.Fatalf("%d connections open with the request in flight, want 1", live)
	}
	close(s.gate)
	if res := <-done; res.Err != nil {
		t.Fatalf("the request in flight failed: %v", res.Err)
	}
	s.liveIs(t, 0, "after the request in flight ended")
}

// Clients of one origin share its connections: closing one keeps the idle
// connection for the other.
func TestClientsOfOneOriginShareAConnection(t *testing.T) {
	s := newConnServer(t, nil)
	tr := sharedTransport(t)
	c1, c2 := transportClient(t, tr, s.srv.URL), transportClient(t, tr, s.srv.URL+"/prefix")
	for _, c := range []*Client{c1, c2, c1} {
		if res := c.Root(context.Background()); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	s.liveIs(t, 1, "after both clients' requests")
	if _, opened := s.counts(); opened != 1 {
		t.Errorf("%d connections opened, want 1 shared", opened)
	}
	c1.Close()
	if res := c2.Root(context.Background()); res.Err != nil {
		t.Fatal(res.Err)
	}
	if live, opened := s.counts(); live != 1 || opened != 1 {
		t.Errorf("after one client closed: %d open, %d opened; want the other's idle connection reused", live, opened)
	}
	c2.Close()
	s.liveIs(t, 0, "after both clients closed")
}

func TestPoolKey(t *testing.T) {
	tests := []struct {
		name, proxy, base, want string
	}{
		{"direct http", "", "http://Deploy.example.com/x", "http deploy.example.com:80"},
		{"direct https with port", "", "https://deploy.example.com:8443", "https deploy.example.com:8443"},
		{"http behind an http proxy shares the proxy's connections", "http://proxy:3128", "http://a.example.com", "http://proxy:3128 http "},
		{"https behind an http proxy tunnels per target", "http://proxy:3128", "https://a.example.com", "http://proxy:3128 https a.example.com:443"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cfg config.HTTPClientConfig
			if tt.proxy != "" {
				u, _ := url.Parse(tt.proxy)
				cfg.ProxyURL = config.URL{URL: u}
			}
			tr, err := NewTransport(cfg, "")
			if err != nil {
				t.Fatal(err)
			}
			u, _ := url.Parse(tt.base)
			if got := tr.poolKey(u); got != tt.want {
				t.Errorf("poolKey = %q, want %q", got, tt.want)
			}
		})
	}
}

func ExampleTransport() {
	// One transport per module; a Client per target.
	tr, err := NewTransport(config.HTTPClientConfig{
		Authorization: &config.Authorization{Type: "Token", Credentials: "example-key"},
	}, "")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, base := range []string{"https://deploy.example.com", "https://deploy-staging.example.com"} {
		u, _ := url.Parse(base)
		c, err := New(Config{BaseURL: u, Transport: tr})
		if err != nil {
			fmt.Println(err)
			return
		}
		defer c.Close()
	}
	fmt.Println("ok")
	// Output: ok
}

// A dial that completes after its request was served by another
// connection, freed meanwhile, does not leave a second idle connection.
func TestNeedlessDialIsClosed(t *testing.T) {
	s := newConnServer(t, nil)
	gate := make(chan struct{})
	first := true
	var mu sync.Mutex
	s.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		hold := first
		first = false
		mu.Unlock()
		s.update(func() { s.arrived++ })
		if hold {
			<-gate
		}
		_, _ = w.Write([]byte("{}"))
	})
	tr := sharedTransport(t)
	dialing := make(chan struct{}, 2)
	release := make(chan struct{})
	var dials int
	tr.conns.dialedHook = func() {
		mu.Lock()
		dials++
		n := dials
		mu.Unlock()
		if n == 2 {
			dialing <- struct{}{}
			<-release
		}
	}
	c := transportClient(t, tr, s.srv.URL)
	defer c.Close()
	r1 := make(chan Result)
	go func() { r1 <- c.Root(context.Background()) }()
	s.waitFor(t, "the first request arriving", func(_, _, arrived int) bool { return arrived == 1 })
	r2 := make(chan Result)
	go func() { r2 <- c.Root(context.Background()) }()
	<-dialing // the second request's dial is done but not yet handed over
	close(gate)
	for _, r := range []chan Result{r1, r2} {
		if res := <-r; res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	close(release)
	s.waitFor(t, "after both requests", func(live, opened, _ int) bool { return opened == 2 && live == 1 })
}

// selfSignedPEM makes a self-signed certificate for 127.0.0.1 and returns
// it for a server, with its PEM for a client's ca_file.
func selfSignedPEM(t *testing.T) (tls.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// The transport re-reads a ca_file that changed: a renewed certificate
// needs no restart (prometheus/common's behaviour, kept with a transport
// of our own).
func TestTransportRereadsTheCAFile(t *testing.T) {
	oldCert, oldPEM := selfSignedPEM(t)
	newCert, newPEM := selfSignedPEM(t)
	var mu sync.Mutex
	current := &oldCert
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("{}"))
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is the point
	// GetConfigForClient, not GetCertificate: httptest adds a certificate
	// of its own, which a client without SNI (an IP address) would get.
	srv.TLS = &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		mu.Lock()
		defer mu.Unlock()
		return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*current}}, nil
	}}
	srv.StartTLS()
	defer srv.Close()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, oldPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	tr, err := NewTransport(config.HTTPClientConfig{
		Authorization: &config.Authorization{Type: "Token", Credentials: testKey},
		TLSConfig:     config.TLSConfig{CAFile: caFile},
	}, "")
	if err != nil {
		t.Fatal(err)
	}
	c := transportClient(t, tr, srv.URL)
	defer c.Close()
	if res := c.Root(context.Background()); res.Err != nil {
		t.Fatalf("with the first certificate: %v", res.Err)
	}
	mu.Lock()
	current = &newCert
	mu.Unlock()
	c.Close() // its connection carries the old certificate's session
	c = transportClient(t, tr, srv.URL)
	defer c.Close()
	if res := c.Root(context.Background()); res.Err == nil {
		t.Fatal("a certificate of an unknown CA was accepted")
	}
	if err := os.WriteFile(caFile, newPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if res := c.Root(context.Background()); res.Err != nil {
		t.Fatalf("after the CA file was renewed: %v", res.Err)
	}
}

// A Client with a transport of its own (the service behind /metrics)
// keeps as many idle connections as its concurrency, for its next poll,
// and closes them when it closes.
func TestOwnTransportKeepsItsConcurrency(t *testing.T) {
	s := newConnServer(t, make(chan struct{}))
	u, _ := url.Parse(s.srv.URL)
	c, err := New(Config{BaseURL: u, Concurrency: 3, HTTPClientConfig: config.HTTPClientConfig{
		Authorization: &config.Authorization{Type: "Token", Credentials: testKey},
	}})
	if err != nil {
		t.Fatal(err)
	}
	rootsAtOnce(t, c, s, 3)
	if res := c.Root(context.Background()); res.Err != nil {
		t.Fatal(res.Err)
	}
	if _, opened := s.counts(); c.lease.t.count() != 3 || opened != 3 {
		t.Errorf("%d connections kept, %d opened; want the 3 kept and reused", c.lease.t.count(), opened)
	}
	c.Close()
	s.liveIs(t, 0, "after the client closed")
}

// count is the number of connections the tracker holds.
func (t *connTracker) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, p := range t.pools {
		n += len(p.conns)
	}
	return n
}

// Answers whose headers outgrow the transport's small read buffer (a long
// Link header, cookies) are read whole all the same.
func TestLongHeadersOutgrowTheReadBuffer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Padding", strings.Repeat("p", 16<<10))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"padded": true}`))
	}))
	defer srv.Close()
	c := transportClient(t, sharedTransport(t), srv.URL)
	defer c.Close()
	for range 2 {
		if res := c.Root(context.Background()); res.Err != nil || res.Status != http.StatusOK {
			t.Fatalf("status %d, %v", res.Status, res.Err)
		}
	}
}
