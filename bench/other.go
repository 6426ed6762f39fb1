//go:build !linux

// Command bench runs the exporter's performance suite; it reads /proc, so
// it runs on Linux only.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "bench: the suite reads /proc and runs on Linux only")
	os.Exit(1)
}
