// Package sighup catches SIGHUP from the process's first moments, as its init runs early.
package sighup

import (
	"os"
	"os/signal"
	"syscall"
)

var hup = make(chan os.Signal, 1)

func init() {
	signal.Notify(hup, syscall.SIGHUP)
}

// Signals delivers SIGHUPs since the process began, merging those that queue.
func Signals() <-chan os.Signal { return hup }
