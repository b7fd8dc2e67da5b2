// Package redisreplica makes a Redis write wait for its replicas: the
// commands run on the primary that serves a key's slot, on one connection,
// followed by WAIT, so the reply says how many replicas have everything
// that connection wrote (and, the replication stream being one ordered log
// per primary, everything any client wrote to that primary before it).
//
// Redis replication is asynchronous: a primary acknowledges a write before
// any replica has it, and a replica promoted after a primary's death lacks
// whatever had not reached it. A write is only acted on outside Redis (a
// Kafka offset committed, an event dispatched, an API answered) once Wait
// said it is on enough replicas; docs/exactly-once.md has the argument.
//
// WAIT counts replicas that have received the writes, not ones that have
// written them to disk (WAITAOF, Redis 7.2, would; the Redis used here is
// 7.0). A promoted replica that had the write in memory keeps it; one that
// crashed too loses what its own AOF had not synced.
package redisreplica

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultTimeout bounds each WAIT when Wait.Timeout is zero.
const DefaultTimeout = time.Second

// ErrNotReplicated is returned when fewer replicas than asked acknowledged
// the writes within the timeout. The writes are on the primary (they
// succeeded there) but may be lost in a failover: the caller must not act
// on them outside Redis, and may retry or reload.
var ErrNotReplicated = errors.New("redisreplica: not on enough replicas")

// Wait is how many replicas must have a write before it counts, and how
// long to wait for them. The zero value is off: writes count when the
// primary has them.
type Wait struct {
	Replicas int
	Timeout  time.Duration
}

// On reports whether writes wait for replicas.
func (w Wait) On() bool { return w.Replicas > 0 }

// Validate rejects negative settings.
func (w Wait) Validate() error {
	if w.Replicas < 0 {
		return fmt.Errorf("redisreplica: %d replicas: want 0 (off) or more", w.Replicas)
	}
	if w.Timeout < 0 {
		return fmt.Errorf("redisreplica: timeout %v is negative", w.Timeout)
	}
	return nil
}

func (w Wait) timeout() time.Duration {
	if w.Timeout <= 0 {
		return DefaultTimeout
	}
	return w.Timeout
}

// Primary is the client of the one server that serves key: c itself for a
// single server, the slot's current primary for a cluster.
func Primary(ctx context.Context, c redis.UniversalClient, key string) (*redis.Client, error) {
	switch c := c.(type) {
	case *redis.Client:
		return c, nil
	case *redis.ClusterClient:
		n, err := c.MasterForKey(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("redisreplica: primary of %q: %w", key, err)
		}
		return n, nil
	default:
		return nil, fmt.Errorf("redisreplica: %T: want a single-server or cluster client", c)
	}
}

// Pipelined runs fn's commands on the primary serving key, all on one
// connection, and then, when w is on, WAIT. The commands' own results are
// in the returned commands (their errors too: check them first); err is
// about the pipeline as a whole or the wait: ErrNotReplicated (wrapped,
// with the counts) when fewer than w.Replicas replicas acknowledged.
// With w off it is a plain pipeline on the primary.
func (w Wait) Pipelined(ctx context.Context, c redis.UniversalClient, key string, fn func(redis.Pipeliner)) ([]redis.Cmder, error) {
	node, err := Primary(ctx, c, key)
	if err != nil {
		return nil, err
	}
	if rt := node.Options().ReadTimeout; w.On() && rt > 0 && w.timeout() >= rt {
		// A pipeline reads with the client's read timeout: a longer WAIT
		// would look like a dead connection.
		return nil, fmt.Errorf("redisreplica: wait timeout %v must be below the Redis read timeout %v", w.timeout(), rt)
	}
	var wait *redis.Cmd
	cmds, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
		fn(p)
		if w.On() {
			wait = p.Do(ctx, "wait", w.Replicas, w.timeout().Milliseconds())
		}
		return nil
	})
	if cc, ok := c.(*redis.ClusterClient); ok && err != nil {
		// The slot may have moved (a failover, a MOVED reply): look the
		// owners up again before the caller's next try.
		cc.ReloadState(ctx)
	}
	if wait == nil {
		return cmds, pipelineErr(err)
	}
	got, werr := wait.Int64()
	if werr != nil {
		if perr := pipelineErr(err); perr != nil {
			return cmds, perr
		}
		return cmds, fmt.Errorf("redisreplica: wait: %w", werr)
	}
	if int(got) < w.Replicas {
		return cmds, fmt.Errorf("%w: %d of %d replicas acknowledged within %v", ErrNotReplicated, got, w.Replicas, w.timeout())
	}
	return cmds, nil
}

// pipelineErr keeps the errors that are about the connection: a command's
// own error reply is the caller's to read from its command.
func pipelineErr(err error) error {
	if err == nil || isReplyError(err) {
		return nil
	}
	return fmt.Errorf("redisreplica: %w", err)
}

func isReplyError(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

// Confirm makes everything written to key's primary so far count: one
// write of value to key (a key of the caller's slot, for nothing but this)
// and WAIT on the same connection. A reader uses it before acting on what
// it read, since WAIT only covers the writes of its own connection.
func (w Wait) Confirm(ctx context.Context, c redis.UniversalClient, key, value string) error {
	if !w.On() {
		return nil
	}
	var set *redis.StatusCmd
	_, err := w.Pipelined(ctx, c, key, func(p redis.Pipeliner) {
		set = p.Set(ctx, key, value, 0)
	})
	if err != nil {
		return err
	}
	if err := set.Err(); err != nil {
		return fmt.Errorf("redisreplica: set %s: %w", key, err)
	}
	return nil
}

// Run runs script s (EVALSHA, EVAL when the server does not have it) on the
// primary serving keys[0], then WAIT, on one connection. The script's reply
// and error are in the returned command; err is Pipelined's.
func (w Wait) Run(ctx context.Context, c redis.UniversalClient, s *redis.Script, keys []string, args ...any) (*redis.Cmd, error) {
	var cmd *redis.Cmd
	run := func(sha bool) error {
		_, err := w.Pipelined(ctx, c, keys[0], func(p redis.Pipeliner) {
			if sha {
				cmd = s.EvalSha(ctx, p, keys, args...)
			} else {
				cmd = s.Eval(ctx, p, keys, args...)
			}
		})
		return err
	}
	err := run(true)
	if cmd != nil && redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		err = run(false)
	}
	if cmd == nil {
		cmd = redis.NewCmd(ctx)
		cmd.SetErr(err)
	}
	return cmd, err
}
