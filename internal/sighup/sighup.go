// Package sighup catches SIGHUP from the process's first moments, as its init runs early.
package sighup

import (
	"os"
	"os/signal"
	"syscall"
)

// Signals delivers SIGHUPs since the process began, merging those that queue.
var Signals = make(chan os.Signal, 1)

func init() { signal.Notify(Signals, syscall.SIGHUP) }
