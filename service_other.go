//go:build !windows

package main

import "syscall"

// runService runs the exporter: only Windows has a service manager to answer.
func runService(run func() int) int { return run() }

// fileLimit returns the most files the process may open, 0 when unknown.
func fileLimit() uint64 {
	var l syscall.Rlimit
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) // which leaves 0 when it fails
	return l.Cur
}
