package client

import (
	"context"
	"fmt"
)

// Concurrency returns the most requests a poll sends at once; the poller holds to it.
func (c *Client) Concurrency() int { return c.cfg.Concurrency }

// RateLimited tells whether the client waits for a rate limit's turns, given in the order asked.
func (c *Client) RateLimited() bool { return c.limiter != nil }

func (c *Client) waitTurn(ctx context.Context) error {
	if c.limiter == nil {
		return nil
	}
	if err := c.limiter.Wait(ctx); err != nil {
		return fmt.Errorf("waiting for the rate limit: %w", err)
	}
	return nil
}
