// Package sighup catches SIGHUP from the first moments of the process, which
// Go would otherwise end: it imports nothing heavy, so its init runs early.
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

// Signals delivers the SIGHUPs since the process began; those that arrive
// while one waits are merged into it, as one reload covers them all.
func Signals() <-chan os.Signal { return hup }
