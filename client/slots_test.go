package client

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSlotsServeListsBeforeDetails(t *testing.T) {
	s := &slots{free: 1}
	if err := s.acquire(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 4)
	start := func(name string, high bool) {
		go func() {
			if err := s.acquire(context.Background(), high); err != nil {
				t.Error(err)
				return
			}
			order <- name
			s.release()
		}()
	}
	// Details queue first, then a list: the list still goes first.
	start("detail-1", false)
	waitQueued(t, s, 0, 1)
	start("detail-2", false)
	waitQueued(t, s, 0, 2)
	start("list", true)
	waitQueued(t, s, 1, 2)
	s.release()
	var got []string
	for range 3 {
		got = append(got, <-order)
	}
	if got[0] != "list" || got[1] != "detail-1" || got[2] != "detail-2" {
		t.Errorf("served %v, want the list first, then the details in order", got)
	}
}

func TestSlotsGiveUpWithTheContext(t *testing.T) {
	s := &slots{free: 1}
	_ = s.acquire(context.Background(), true)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := s.acquire(ctx, true); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("acquire: %v, want the deadline", err)
	}
	s.release()
	// The slot is free again: nobody holds it after the waiter gave up.
	if err := s.acquire(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if s.free != 0 || len(s.high)+len(s.low) != 0 {
		t.Errorf("free %d, queued %d: the waiter that gave up was not removed", s.free, len(s.high)+len(s.low))
	}
}

func waitQueued(t *testing.T, s *slots, high, low int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // turns a hang into a failure
	for {
		s.mu.Lock()
		h, l := len(s.high), len(s.low)
		s.mu.Unlock()
		if h == high && l == low {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queued %d high and %d low, want %d and %d", h, l, high, low)
		}
		time.Sleep(time.Millisecond)
	}
}
