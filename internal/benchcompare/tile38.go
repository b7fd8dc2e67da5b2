package benchcompare

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// tile38PID asks the server for its process id (SERVER's stats), so its
// CPU can be read from /proc when it runs on this machine.
func tile38PID(ctx context.Context, addr string) (int, error) {
	c, err := dial(ctx, addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	if _, err := c.do("OUTPUT", "json"); err != nil {
		return 0, err
	}
	v, err := c.do("SERVER")
	if err != nil {
		return 0, err
	}
	s, _ := v.(string)
	var m struct {
		OK    bool   `json:"ok"`
		Err   string `json:"err"`
		Stats struct {
			PID int `json:"pid"`
		} `json:"stats"`
	}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return 0, fmt.Errorf("tile38: SERVER: %w", err)
	}
	if !m.OK || m.Stats.PID == 0 {
		return 0, fmt.Errorf("tile38: SERVER gave no pid (%s)", m.Err)
	}
	return m.Stats.PID, checkPid(m.Stats.PID, "tile38")
}

const sentinelID = "~end-of-stream"

// tile38Round is one run of the stream through Tile38: a channel per zone
// (SETCHAN … WITHIN key FENCE DETECT enter,exit), one subscriber of all of
// them, the clients pipelining their batches of SETs. The stream has been
// delivered when a last SET, after every client's replies, raises the
// sentinel channel's event: Tile38 publishes a SET's channel messages
// while it executes the SET, so the subscriber receives them in command
// order.
type tile38Round struct {
	addr   string
	prefix string // of the round's channels and key
	zones  []Zone
	sets   [][][]byte
	counts [][]int
	smp    *sampler
}

type roundResult struct {
	wall     time.Duration
	cpu      []time.Duration
	events   []Event
	accepted int
}

func (t *tile38Round) run(ctx context.Context) (res roundResult, err error) {
	key := t.prefix + "fleet"
	admin, err := dial(ctx, t.addr)
	if err != nil {
		return res, err
	}
	defer admin.Close()
	defer func() {
		// The round's channels and objects go, whatever happened.
		_, _ = admin.do("PDELCHAN", t.prefix+"*")
		_, _ = admin.do("DROP", key)
	}()
	names := make([]string, 0, len(t.zones)+1)
	for _, z := range t.zones {
		args, err := z.SetChan(t.prefix+z.ID, key)
		if err != nil {
			return res, err
		}
		if _, err := admin.do(args...); err != nil {
			return res, err
		}
		names = append(names, t.prefix+z.ID)
	}
	end := t.prefix + sentinelID
	if _, err := admin.do("SETCHAN", end, "WITHIN", key, "FENCE", "DETECT", "enter", "CIRCLE", "0", "0", "1000"); err != nil {
		return res, err
	}
	names = append(names, end)

	sub, err := dial(ctx, t.addr)
	if err != nil {
		return res, err
	}
	defer sub.Close()
	if _, err := sub.c.Write(appendCommand(nil, append([]string{"SUBSCRIBE"}, names...)...)); err != nil {
		return res, fmt.Errorf("tile38: SUBSCRIBE: %w", err)
	}
	for range names {
		if _, err := readReply(sub.r); err != nil {
			return res, fmt.Errorf("tile38: SUBSCRIBE: %w", err)
		}
	}
	var msgs [][]byte
	done := make(chan error, 1)
	go func() {
		for {
			v, err := readReply(sub.r)
			if err != nil {
				done <- err
				return
			}
			a, ok := v.([]any)
			if !ok || len(a) != 3 || a[0] != "message" {
				continue
			}
			if a[1] == end {
				done <- nil
				return
			}
			s, _ := a[2].(string)
			msgs = append(msgs, []byte(s))
		}
	}()

	before := t.smp.take()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(t.sets))
	for c := range t.sets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := dial(ctx, t.addr)
			if err != nil {
				errs[c] = err
				return
			}
			defer conn.Close()
			for i, b := range t.sets[c] {
				if ctx.Err() != nil {
					errs[c] = ctx.Err()
					return
				}
				if err := conn.pipeline(b, t.counts[c][i]); err != nil {
					errs[c] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return res, err
	}
	if _, err := admin.do("SET", key, sentinelID, "FIELD", "seq", "0", "POINT", "0", "0"); err != nil {
		return res, err
	}
	select {
	case err := <-done:
		if err != nil {
			return res, fmt.Errorf("tile38: subscriber: %w", err)
		}
	case <-time.After(2 * time.Minute):
		return res, errors.New("tile38: the end-of-stream event did not arrive in 2 minutes")
	case <-ctx.Done():
		return res, ctx.Err()
	}
	res.wall = time.Since(start)
	res.cpu = delta(before, t.smp.take())
	for _, n := range t.counts {
		for _, k := range n {
			res.accepted += k
		}
	}
	for _, m := range msgs {
		e, ok, err := Tile38Event(m, t.prefix)
		if err != nil {
			return res, err
		}
		if ok {
			res.events = append(res.events, e)
		}
	}
	return res, nil
}

func itoa(n int) string { return strconv.Itoa(n) }
