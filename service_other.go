//go:build !windows

package main

// runService runs the exporter: only Windows has a service manager to
// answer (service_windows.go).
func runService(run func() int) int { return run() }
