//go:build windows

package main

import (
	"testing"

	"golang.org/x/sys/windows/svc"
)

// execute runs s.Execute with the change requests reqs, and returns what it
// returned and the statuses it reported.
func execute(s *service, reqs ...svc.ChangeRequest) (specific bool, code uint32, statuses []svc.State) {
	req := make(chan svc.ChangeRequest, len(reqs))
	for _, r := range reqs {
		req <- r
	}
	status := make(chan svc.Status, 8)
	specific, code = s.Execute(nil, req, status)
	close(status)
	for st := range status {
		statuses = append(statuses, st.State)
	}
	return specific, code, statuses
}

func TestServiceStopsOnStopAndShutdown(t *testing.T) {
	for _, cmd := range []svc.Cmd{svc.Stop, svc.Shutdown} {
		s := &service{exited: make(chan int)}
		running := svc.Status{State: svc.Running}
		specific, code, statuses := execute(s, svc.ChangeRequest{Cmd: svc.Interrogate, CurrentStatus: running}, svc.ChangeRequest{Cmd: cmd})
		want := []svc.State{svc.Running, svc.Running, svc.StopPending}
		if specific || code != 0 || len(statuses) != len(want) {
			t.Fatalf("command %d: Execute returned (%t, %d) after statuses %v, want (false, 0) after %v", cmd, specific, code, statuses, want)
		}
		for i := range want {
			if statuses[i] != want[i] {
				t.Errorf("command %d: statuses %v, want %v", cmd, statuses, want)
			}
		}
	}
}

func TestServiceStopsWithTheExportersExitCode(t *testing.T) {
	s := &service{exited: make(chan int, 1)}
	s.exited <- 1
	if specific, code, _ := execute(s); !specific || code != 1 || s.code != 1 {
		t.Errorf("Execute returned (%t, %d) and kept code %d, want (true, 1) and 1", specific, code, s.code)
	}
}
