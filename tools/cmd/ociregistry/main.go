// Command ociregistry serves an in-memory OCI registry (go-containerregistry's
// pkg/registry) on a loopback address, so that CI can push the Helm chart
// with `helm push` and install it from oci:// without any registry of its own.
//
//	ociregistry -listen 127.0.0.1:5000
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to serve on; the address taken is printed on stdout")
	flag.Parse()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ociregistry:", err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr())
	srv := &http.Server{
		Handler:           registry.New(registry.Logger(log.New(os.Stderr, "", log.LstdFlags))),
		ReadHeaderTimeout: 10 * time.Second,
	}
	if err := srv.Serve(ln); err != nil {
		fmt.Fprintln(os.Stderr, "ociregistry:", err)
		os.Exit(1)
	}
}
