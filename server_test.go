package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// pipeListener hands a server in-memory connections, whose deadlines run
// on synctest's clock.
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// dial connects a client to the server and returns the client's end.
func (l *pipeListener) dial() net.Conn {
	client, server := net.Pipe()
	l.conns <- server
	return client
}

// TestServerDropsSlowAndIdleConnections holds the exporter's server to
// its bounds: a connection that sends half a request, or idles after an
// answer, is closed, idle ones within two minutes, so that idle clients
// cannot take every file descriptor.
func TestServerDropsSlowAndIdleConnections(t *testing.T) {
	for _, tc := range []struct {
		name, send string
		answered   bool
		within     func(*http.Server) time.Duration
	}{
		{"idle after an answer", "GET /-/healthy HTTP/1.1\r\nHost: exporter\r\n\r\n", true,
			func(*http.Server) time.Duration { return 2 * time.Minute }},
		{"a header that never ends", "GET /-/healthy HTTP/1.1\r\nHost: exporter\r\n", false,
			func(s *http.Server) time.Duration { return s.ReadHeaderTimeout }},
		{"a body that never comes", "POST /-/reload HTTP/1.1\r\nHost: exporter\r\nContent-Length: 100\r\n\r\n", true,
			func(s *http.Server) time.Duration { return s.ReadTimeout }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := newServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
					_, _ = io.WriteString(w, "ok\n")
				}), 0)
				limit := tc.within(srv)
				if limit <= 0 {
					t.Fatal("the server sets no bound for this")
				}
				l := newPipeListener()
				served := make(chan error, 1)
				go func() { served <- srv.Serve(l) }()
				conn := l.dial()
				defer conn.Close()
				br := bufio.NewReader(conn)
				if _, err := io.WriteString(conn, tc.send); err != nil {
					t.Fatal(err)
				}
				if tc.answered {
					resp, err := http.ReadResponse(br, nil)
					if err != nil {
						t.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
				}
				start := time.Now()
				if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
					t.Errorf("read from the connection: %v, want EOF", err)
				}
				if waited := time.Since(start); waited > limit {
					t.Errorf("closed after %v, want within %v", waited, limit)
				}
				_ = srv.Close()
				if err := <-served; !errors.Is(err, http.ErrServerClosed) {
					t.Errorf("Serve: %v", err)
				}
			})
		})
	}
}

// TestConnectionsStayBelowTheFileLimit: with a file limit of 16, a client
// that holds idle keep-alive connections loses them once more than 4 are
// open, and connections past 8 are closed at once; /metrics still answers.
func TestConnectionsStayBelowTheFileLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "ok\n")
		}), 16)
		l := newPipeListener()
		go func() { _ = srv.Serve(l) }()
		defer srv.Close()
		var closed atomic.Int64
		hold := func(conn net.Conn, br *bufio.Reader) {
			go func() { // the server closing it is an EOF here
				if _, err := br.ReadByte(); err != nil {
					closed.Add(1)
				}
				_ = conn.Close()
			}()
		}
		get := func(path string) (net.Conn, *bufio.Reader, error) {
			conn := l.dial()
			br := bufio.NewReader(conn)
			if _, err := io.WriteString(conn, "GET "+path+" HTTP/1.1\r\nHost: exporter\r\n\r\n"); err != nil {
				return conn, br, err
			}
			resp, err := http.ReadResponse(br, nil)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
			return conn, br, err
		}
		for range 12 { // idle keep-alives
			conn, br, err := get("/-/healthy")
			if err != nil {
				t.Fatal(err)
			}
			hold(conn, br)
			synctest.Wait()
		}
		if n := closed.Load(); n < 12-4 {
			t.Errorf("%d of 12 idle connections closed, want at least 8", n)
		}
		closed.Store(0)
		for range 12 { // connections that send nothing yet
			conn := l.dial()
			hold(conn, bufio.NewReader(conn))
		}
		synctest.Wait()
		if n := closed.Load(); n < 4 {
			t.Errorf("%d of 12 silent connections closed, want at least 4 (those past 8)", n)
		}
		time.Sleep(6 * time.Second) // silent for over 5 s: as good as idle
		if _, _, err := get("/metrics"); err != nil {
			t.Errorf("/metrics while a client holds the rest: %v", err)
		}
	})
}

// TestMetricsAnswerWhileAClientHoldsConnections runs the exporter with 64
// open files and a client that holds 100 keep-alive connections: /metrics
// still answers, and the demo's service is still polled.
func TestMetricsAnswerWhileAClientHoldsConnections(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no file limit to lower")
	}
	addr := freeAddr(t)
	cmd := exec.Command("sh", "-c", `ulimit -n 64 && exec "$0" "$@"`, binary, "--demo", "--web.listen-address="+addr)
	cmd.Env = cleanEnv()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	e := &exporter{addr: addr}
	eventually(t, "the exporter became ready", func() bool { code, _ := e.get(t, "/-/ready"); return code == http.StatusOK })
	for range 100 {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			continue
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(time.Second)) // past the limit, no answer is the point
		if _, err := io.WriteString(conn, "GET /-/healthy HTTP/1.1\r\nHost: exporter\r\n\r\n"); err == nil {
			if resp, err := http.ReadResponse(bufio.NewReader(conn), nil); err == nil {
				_ = resp.Body.Close()
			}
		}
	}
	if code, body := e.get(t, "/metrics"); code != http.StatusOK || !strings.Contains(body, "deployment_service_up 1") {
		t.Errorf("/metrics while a client holds connections: %d\n%.300s", code, body)
	}
}
