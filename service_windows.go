//go:build windows

package main

import "golang.org/x/sys/windows/svc"

// runService runs the exporter as a Windows service when the service manager started it.
func runService(run func() int) int {
	if isService, err := svc.IsWindowsService(); err != nil || !isService {
		return run()
	}
	s := &service{exited: make(chan int, 1)}
	go func() { s.exited <- run() }()
	if err := svc.Run(exporterName, s); err != nil {
		return 1
	}
	return s.code
}

// service answers the service manager: Stop and Shutdown end the process at once; an exporter that exits stops the service with its code.
type service struct {
	exited chan int
	code   int
}

func (s *service) Execute(_ []string, req <-chan svc.ChangeRequest, status chan<- svc.Status) (bool, uint32) {
	status <- svc.Status{State: svc.Running, Accepts: svc.AcceptStop | svc.AcceptShutdown}
	for {
		select {
		case s.code = <-s.exited:
			return s.code != 0, uint32(s.code)
		case r := <-req:
			switch r.Cmd {
			case svc.Interrogate:
				status <- r.CurrentStatus
			case svc.Stop, svc.Shutdown:
				status <- svc.Status{State: svc.StopPending}
				return false, 0
			}
		}
	}
}

// fileLimit is 0: Windows bounds handles per process far above what a listener reaches.
func fileLimit() uint64 { return 0 }
