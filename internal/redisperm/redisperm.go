// Package redisperm checks at start that the Redis user nofly connects as
// may run every command nofly runs on its keys, so that a missing ACL rule
// stops the alerter with one line naming the command, instead of failing
// the first batch, ack or stream later.
//
// The check queues each command, on a probe key under the prefix, inside
// MULTI and ends with DISCARD: Redis checks the ACL (command and key) when
// it queues a command, and DISCARD runs none of them, so nothing is read or
// written. One round trip. EXEC itself cannot be probed that way (it would
// run the queue); a user without it fails at the first batch.
package redisperm

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Commands are the commands nofly runs, each with arguments of the right
// arity on key k (and k2, in k's slot): the list of docs/operations.md's
// ACL line (tested against it). The Lua scripts' commands are in it, since
// Redis checks them against the ACL as they run.
func Commands(k, k2 string) [][]any {
	return [][]any{
		{"ping"}, {"time"}, {"wait", 0, 0},
		{"eval", "return 1", 1, k}, {"evalsha", strings.Repeat("0", 40), 1, k}, {"script", "load", "return 1"},
		{"del", k}, {"unlink", k}, {"exists", k}, {"get", k}, {"getdel", k}, {"getrange", k, 0, 0},
		{"set", k, "v"}, {"append", k, "v"}, {"strlen", k}, {"mget", k}, {"rename", k, k2},
		{"persist", k}, {"pexpire", k, 1}, {"pexpireat", k, 1},
		{"hget", k, "f"}, {"hset", k, "f", "v"}, {"hdel", k, "f"}, {"hexists", k, "f"}, {"hgetall", k},
		{"hmget", k, "f"}, {"hstrlen", k, "f"}, {"hscan", k, 0},
		{"lrange", k, 0, 0}, {"rpush", k, "v"}, {"ltrim", k, 0, 0},
		{"zadd", k, 1, "m"}, {"zrem", k, "m"}, {"zcard", k}, {"zrange", k, 0, 0}, {"zrangebyscore", k, 0, 1},
		{"zrangebylex", k, "-", "+"}, {"zrevrangebyscore", k, 1, 0}, {"zmscore", k, "m"},
		{"geoadd", k, 0, 0, "m"}, {"geosearch", k, "fromlonlat", 0, 0, "byradius", 1, "m"},
		{"xadd", k, "*", "f", "v"}, {"xdel", k, "0-1"}, {"xlen", k}, {"xrange", k, "-", "+"},
		{"xrevrange", k, "+", "-"}, {"xread", "count", 1, "streams", k, "0"}, {"xtrim", k, "minid", 0},
		{"xinfo", "stream", k},
	}
}

// ErrDenied: the user may not run a command nofly runs.
var ErrDenied = errors.New("redis permissions")

// ProbeKey is the key the check names: under the prefix's hash tag, which
// every key of nofly's is (docs/redis-layout.md).
func ProbeKey(prefix string) (string, string) {
	return "{" + prefix + ":probe}", "{" + prefix + ":probe}:2"
}

// Check queues Commands inside MULTI on one connection of rdb (on a
// cluster, of each primary) and discards them. It returns an error naming
// the first command the user may not run, or the key it may not touch.
func Check(ctx context.Context, rdb redis.UniversalClient, user, prefix string) error {
	if c, ok := rdb.(*redis.ClusterClient); ok {
		err := c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return check(ctx, n, user, prefix) })
		if errors.Is(err, ErrDenied) {
			return err
		}
		// A primary that does not answer (one down at start) is the
		// store's to wait out, as before this check; what was asked
		// of the others passed.
		return nil
	}
	c, ok := rdb.(*redis.Client)
	if !ok {
		return fmt.Errorf("redis permissions: a %T cannot be checked", rdb)
	}
	return check(ctx, c, user, prefix)
}

func check(ctx context.Context, c *redis.Client, user, prefix string) error {
	k, k2 := ProbeKey(prefix)
	cmds := Commands(k, k2)
	conn := c.Conn()
	defer conn.Close()
	var queued []*redis.Cmd
	_, err := conn.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Do(ctx, "multi")
		for _, args := range cmds {
			queued = append(queued, p.Do(ctx, args...))
		}
		p.Do(ctx, "discard")
		return nil
	})
	for i, q := range queued {
		if e := q.Err(); e != nil && strings.HasPrefix(e.Error(), "NOPERM") {
			name := strings.ToUpper(fmt.Sprint(cmds[i][0]))
			if name == "SCRIPT" || name == "XINFO" {
				name += " " + strings.ToUpper(fmt.Sprint(cmds[i][1]))
			}
			if user == "" {
				user = "default"
			}
			return fmt.Errorf("%w: redis user %s may not run %s on key %s: %v: grant it (docs/operations.md, Least privilege)", ErrDenied, user, name, k, e)
		}
	}
	if err != nil && strings.HasPrefix(err.Error(), "NOPERM") {
		return fmt.Errorf("%w: redis user %s: %v (MULTI or DISCARD): grant it (docs/operations.md, Least privilege)", ErrDenied, user, err)
	}
	return nil
}
