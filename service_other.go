//go:build !windows

package main

// runService runs the exporter: only Windows has a service manager to answer.
func runService(run func() int) int { return run() }
