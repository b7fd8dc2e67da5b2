package producer

import (
	"fmt"
	"sync"
	"time"
)

// call tracks the records of one Produce call until each is acknowledged or
// failed.
type call struct {
	deadline time.Time // enqueue time + DeliveryTimeout
	done     chan struct{}

	mu        sync.Mutex
	remaining int
	state     []uint8 // per record: 0 pending, 1 acknowledged, 2 failed
	errs      map[int]error
	abandoned bool
}

func newCall(n int, deadline time.Time) *call {
	return &call{deadline: deadline, done: make(chan struct{}), remaining: n, state: make([]uint8, n)}
}

// complete settles the records idxs with err (nil: acknowledged).
func (c *call) complete(idxs []int32, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, i := range idxs {
		if c.state[i] != 0 {
			continue
		}
		if err == nil {
			c.state[i] = 1
		} else {
			c.state[i] = 2
			if c.errs == nil {
				c.errs = make(map[int]error)
			}
			c.errs[int(i)] = err
		}
		c.remaining--
	}
	if c.remaining == 0 {
		close(c.done)
	}
}

func (c *call) err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.errs) == 0 {
		return nil
	}
	return newProduceError(c.errs)
}

// abandon is what Produce returns when its context ends first: every record
// not yet settled is reported with cause; those may still be written.
func (c *call) abandon(cause error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	errs := make(map[int]error, c.remaining+len(c.errs))
	for i, e := range c.errs {
		errs[i] = e
	}
	wrapped := fmt.Errorf("producer: stopped waiting, the records may still be written: %w", cause)
	for i, st := range c.state {
		if st == 0 {
			errs[i] = wrapped
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return newProduceError(errs)
}
