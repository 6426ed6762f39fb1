// Package sighup catches SIGHUP from the first moments of the process.
//
// Go ends a process on a SIGHUP that nothing has asked for, and the
// exporter's other packages take milliseconds to initialise before main
// runs. This package imports nothing heavy, so its init runs among the
// first: a reload signal sent while the exporter starts waits in the
// channel instead of ending it.
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

// Signals delivers each SIGHUP since the process began; signals that
// arrive while one is waiting are merged into it, as one reload covers
// them all.
func Signals() <-chan os.Signal { return hup }
