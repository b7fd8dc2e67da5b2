//go:build cluster

package testenv

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestClusterRedisSlotsAndCrossSlot: the cluster scripts/redis-cluster.sh
// starts has the settings the cluster proofs rely on, as each node reports
// them; its three primaries own all 16384 slots, each exactly once; keys
// with the hash tags {a}, {b}, ... land on all three, where PrimaryOf and
// the cluster client both say; the cluster refuses a script declaring keys
// of two slots (CROSSSLOT) and writes nothing; and with no replicas, a dead
// primary takes the whole cluster down (full coverage required) until it
// is back with its acknowledged writes.
func TestClusterRedisSlotsAndCrossSlot(t *testing.T) {
	t.Parallel() // servers of its own on free ports; the step mostly waits on them
	ctx := context.Background()
	c := StartRedisCluster(t, false)
	if c.Nodes() != 3 {
		t.Fatalf("Nodes() = %d, want 3", c.Nodes())
	}
	if p, err := c.Primaries(ctx); err != nil || !slices.Equal(p, []int{1, 2, 3}) {
		t.Fatalf("Primaries() = %v, %v; want [1 2 3]", p, err)
	}

	want := map[string]string{
		"cluster-enabled":               "yes",
		"cluster-node-timeout":          "2000",
		"cluster-require-full-coverage": "yes",
		"appendonly":                    "yes",
		"appendfsync":                   "always",
		"maxmemory-policy":              "noeviction",
	}
	for n := 1; n <= c.Nodes(); n++ {
		cl := nodeClient(t, c, n)
		for name, v := range want {
			got, err := cl.ConfigGet(ctx, name).Result()
			if err != nil {
				t.Fatalf("node %d: CONFIG GET %s: %v", n, name, err)
			}
			if got[name] != v {
				t.Errorf("node %d: %s = %q, want %q", n, name, got[name], v)
			}
		}
		info := clusterInfo(t, cl)
		for k, v := range map[string]string{"cluster_state": "ok", "cluster_slots_assigned": "16384", "cluster_slots_ok": "16384", "cluster_known_nodes": "3", "cluster_size": "3"} {
			if info[k] != v {
				t.Errorf("node %d: %s = %q, want %q", n, k, info[k], v)
			}
		}
	}

	cl := c.Client(t)
	slots, err := cl.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	var owner [RedisClusterSlots]string
	owners := map[string]int{}
	for _, s := range slots {
		if len(s.Nodes) == 0 {
			t.Fatalf("slots %d-%d: no node", s.Start, s.End)
		}
		for i := s.Start; i <= s.End; i++ {
			if owner[i] != "" {
				t.Fatalf("slot %d owned twice: %s and %s", i, owner[i], s.Nodes[0].Addr)
			}
			owner[i] = s.Nodes[0].Addr
		}
		owners[s.Nodes[0].Addr] += s.End - s.Start + 1
	}
	for i, o := range owner {
		if o == "" {
			t.Fatalf("slot %d has no owner", i)
		}
	}
	for n := 1; n <= 3; n++ {
		if owners[c.Addr(n)] == 0 {
			t.Errorf("node %d (%s) owns no slot; owners %v", n, c.Addr(n), owners)
		}
	}
	if len(owners) != 3 {
		t.Errorf("slot owners %v, want the 3 nodes", owners)
	}
	t.Logf("slots per primary: %v", owners)

	// Hash tags: each key on the primary PrimaryOf names, where the cluster
	// client sends it and where the node itself has it; another node answers
	// MOVED.
	byNode := map[int][]string{}
	for tag := 'a'; tag <= 'z'; tag++ {
		key := fmt.Sprintf("{%c}:%s", tag, UniqueName("k"))
		n, err := c.PrimaryOf(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		m, err := cl.MasterForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if m.Options().Addr != c.Addr(n) {
			t.Errorf("key %s: PrimaryOf says node %d (%s), the cluster client %s", key, n, c.Addr(n), m.Options().Addr)
		}
		if err := cl.Set(ctx, key, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if v, err := nodeClient(t, c, n).Get(ctx, key).Result(); err != nil || v != "v" {
			t.Errorf("key %s on node %d: %q, %v", key, n, v, err)
		}
		other := n%3 + 1
		if err := nodeClient(t, c, other).Get(ctx, key).Err(); err == nil || !strings.HasPrefix(err.Error(), "MOVED ") {
			t.Errorf("key %s asked of node %d: %v, want MOVED", key, other, err)
		}
		byNode[n] = append(byNode[n], key)
	}
	for n := 1; n <= 3; n++ {
		if len(byNode[n]) == 0 {
			t.Errorf("no tag {a}..{z} lands on node %d: %v", n, byNode)
		}
	}
	t.Logf("tags {a}..{z} per primary: %d, %d, %d", len(byNode[1]), len(byNode[2]), len(byNode[3]))

	// CROSSSLOT: declared keys of two slots, on two nodes and on one node,
	// through the cluster client and straight to the node; nothing written.
	slotOf := func(key string) int64 { return cl.ClusterKeySlot(ctx, key).Val() }
	var sameNode [2]string
	for _, keys := range byNode {
		for _, k := range keys[1:] {
			if slotOf(k) != slotOf(keys[0]) {
				sameNode = [2]string{"{" + keys[0][1:2] + "}:" + UniqueName("x"), "{" + k[1:2] + "}:" + UniqueName("x")}
			}
		}
	}
	if sameNode[0] == "" {
		t.Fatal("no two tags of different slots on one node")
	}
	twoNodes := [2]string{"{" + byNode[1][0][1:2] + "}:" + UniqueName("x"), "{" + byNode[2][0][1:2] + "}:" + UniqueName("x")}
	const setBoth = "redis.call('SET', KEYS[1], ARGV[1]); return redis.call('SET', KEYS[2], ARGV[1])"
	for _, keys := range [][2]string{twoNodes, sameNode} {
		err := cl.Eval(ctx, setBoth, keys[:], "v").Err()
		if err == nil || !strings.HasPrefix(err.Error(), "CROSSSLOT") {
			t.Errorf("EVAL over %v (slots %d, %d) through the cluster client: %v, want CROSSSLOT", keys, slotOf(keys[0]), slotOf(keys[1]), err)
		}
		n, err := c.PrimaryOf(ctx, keys[0])
		if err != nil {
			t.Fatal(err)
		}
		err = nodeClient(t, c, n).Eval(ctx, setBoth, keys[:], "v").Err()
		if err == nil || !strings.HasPrefix(err.Error(), "CROSSSLOT") {
			t.Errorf("EVAL over %v straight to node %d: %v, want CROSSSLOT", keys, n, err)
		}
		for _, k := range keys {
			if e, err := cl.Exists(ctx, k).Result(); err != nil || e != 0 {
				t.Errorf("key %s after the refused EVAL: exists %d, %v", k, e, err)
			}
		}
	}
	// What the cluster does not refuse (Redis 7.0): a script's undeclared
	// key is checked against the node, not the slot. One on another node
	// fails the script there, after the writes before it (no rollback);
	// one of another slot on the same node is written.
	const setUndeclared = "redis.call('SET', KEYS[1], ARGV[1]); return redis.call('SET', ARGV[2], ARGV[1])"
	err = cl.Eval(ctx, setUndeclared, twoNodes[:1], "v", twoNodes[1]).Err()
	if err == nil || !strings.Contains(err.Error(), "non local key") {
		t.Errorf("EVAL writing the undeclared key %s of another node: %v, want the non-local-key error", twoNodes[1], err)
	}
	if e := cl.Exists(ctx, twoNodes[0]).Val(); e != 1 {
		t.Errorf("the declared key %s written before the failing call: exists %d, want 1 (scripts do not roll back)", twoNodes[0], e)
	}
	if err := cl.Eval(ctx, setUndeclared, sameNode[:1], "v", sameNode[1]).Err(); err != nil {
		t.Errorf("EVAL writing the undeclared key %s of another slot on the same node: %v (Redis 7.0 allowed it; if refused now, say so where tests rely on it)", sameNode[1], err)
	}

	// No replicas, full coverage required: a dead primary's slots stop the
	// whole cluster, and its acknowledged writes (AOF always) come back.
	victim, err := c.PrimaryOf(ctx, byNode[3][0])
	if err != nil {
		t.Fatal(err)
	}
	other := byNode[1][0]
	if err := c.Kill(victim); err != nil {
		t.Fatal(err)
	}
	if err := c.Kill(victim); err == nil {
		t.Error("a second Kill of a dead node succeeded")
	}
	CheckFor(t, time.Minute, func() error {
		err := nodeClient(t, c, 1).Set(ctx, other, "w", 0).Err()
		if err == nil || !strings.HasPrefix(err.Error(), "CLUSTERDOWN") {
			return fmt.Errorf("a write to node 1 with node %d dead: %v, want CLUSTERDOWN", victim, err)
		}
		return nil
	})
	// Three node timeouts: long enough for a failover, were there a replica.
	wctx, cancel := context.WithTimeout(ctx, 3*redisClusterNodeTimeout*time.Millisecond)
	if n, err := c.WaitPromoted(wctx, byNode[3][0], victim); err == nil {
		t.Errorf("WaitPromoted found node %d a new primary in a cluster without replicas", n)
	}
	cancel()
	if err := c.Restart(ctx, victim); err != nil {
		t.Fatal(err)
	}
	for _, k := range byNode[3] {
		if v, err := nodeClient(t, c, victim).Get(ctx, k).Result(); err != nil || v != "v" {
			t.Errorf("key %s after node %d's SIGKILL and restart: %q, %v", k, victim, v, err)
		}
	}
	if err := cl.Set(ctx, other, "w", 0).Err(); err != nil {
		t.Errorf("a write with every primary back: %v", err)
	}
}

// TestClusterRedisFailover: with replicas, each primary has its own; a
// write acknowledged by WAIT 1 survives a SIGKILL of its primary on the
// replica WaitPromoted names (within seconds at cluster-node-timeout 2 s),
// the cluster client reaches it there, and the killed node comes back as
// that node's replica, in sync.
func TestClusterRedisFailover(t *testing.T) {
	t.Parallel() // servers of its own on free ports; the step mostly waits on them
	ctx := context.Background()
	c := StartRedisCluster(t, true)
	if c.Nodes() != 6 {
		t.Fatalf("Nodes() = %d, want 6", c.Nodes())
	}
	prim, err := c.Primaries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(prim) != 3 {
		t.Fatalf("Primaries() = %v, want 3", prim)
	}
	roles := []string{}
	seen := slices.Clone(prim)
	for _, p := range prim {
		r, err := c.ReplicaOf(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(seen, r) {
			t.Fatalf("node %d is the replica of node %d, but primary or replica already (%v)", r, p, seen)
		}
		seen = append(seen, r)
		roles = append(roles, fmt.Sprintf("%d<-%d", p, r))
	}
	t.Logf("primaries <- replicas: %s", strings.Join(roles, " "))

	// A second start finds it running and changes nothing.
	if err := c.run(ctx, "start"); err != nil {
		t.Fatal(err)
	}
	if p, err := c.Primaries(ctx); err != nil || !slices.Equal(p, prim) {
		t.Fatalf("after a second start: Primaries() = %v, %v; want %v", p, err, prim)
	}

	key := "{failover}:" + UniqueName("k")
	p, err := c.PrimaryOf(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.ReplicaOf(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	// WAIT counts what reached replicas of this connection's writes: one
	// connection for both.
	conn := nodeClient(t, c, p).Conn()
	defer conn.Close()
	if err := conn.Set(ctx, key, "acked", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := conn.Do(ctx, "WAIT", 1, 1000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 1000 after the write on node %d: %d, %v; want 1", p, n, err)
	}

	// Then the replica cut off: a write the primary acknowledges that no
	// replica gets, and that the failover loses.
	if err := c.Cut(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := c.Cut(ctx, p); err == nil {
		t.Errorf("Cut of primary node %d succeeded", p)
	}
	lost := "{failover}:" + UniqueName("lost")
	if err := conn.Set(ctx, lost, "acked-by-the-primary-alone", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := conn.Do(ctx, "WAIT", 1, 200).Int(); err != nil || n != 0 {
		t.Fatalf("WAIT 1 200 with replica node %d cut: %d, %v; want 0", r, n, err)
	}
	if v, err := c.Get(ctx, r, key); err != nil || v != "acked" {
		t.Errorf("replica node %d holds %q = %q, %v; want the write from before the cut", r, key, v, err)
	}
	if v, err := c.Get(ctx, r, lost); !errors.Is(err, redis.Nil) {
		t.Errorf("cut replica node %d holds %q = %q, %v; want none", r, lost, v, err)
	}

	if err := c.Kill(p); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if err := c.Heal(ctx, r); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	got, err := c.WaitPromoted(wctx, key, p)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(killed)
	t.Logf("SIGKILL of primary node %d: replica node %d serves its slots, cluster ok, after %v", p, got, took.Round(time.Millisecond))
	if got != r {
		t.Errorf("node %d promoted, want node %d, the replica of node %d", got, r, p)
	}
	if took > 15*time.Second {
		t.Errorf("failover took %v, over 15 s at cluster-node-timeout %d ms", took, redisClusterNodeTimeout)
	}
	if v, err := nodeClient(t, c, got).Get(ctx, key).Result(); err != nil || v != "acked" {
		t.Errorf("the acknowledged write on the promoted node %d: %q, %v", got, v, err)
	}
	if v, err := c.Get(ctx, got, lost); !errors.Is(err, redis.Nil) {
		t.Errorf("the write only the dead primary had, on the promoted node %d: %q, %v; want none", got, v, err)
	}
	if now, err := c.Primaries(ctx); err != nil || slices.Contains(now, p) || !slices.Contains(now, got) || len(now) != 3 {
		t.Errorf("after the failover Primaries() = %v, %v; want %d out, %d in", now, err, p, got)
	}
	cl := c.Client(t)
	CheckFor(t, 30*time.Second, func() error {
		v, err := cl.Get(ctx, key).Result()
		if err == nil && v != "acked" {
			err = fmt.Errorf("cluster client reads %q", v)
		}
		return err
	})
	if err := cl.Set(ctx, key, "after", 0).Err(); err != nil {
		t.Fatalf("a write through the cluster client after the failover: %v", err)
	}

	if err := c.Restart(ctx, p); err != nil {
		t.Fatal(err)
	}
	t.Logf("node %d back after %v", p, time.Since(killed).Round(time.Millisecond))
	if rr, err := c.ReplicaOf(ctx, got); err != nil || rr != p {
		t.Errorf("ReplicaOf(%d) = %d, %v; want the restarted node %d", got, rr, err, p)
	}
	if now, err := c.Primaries(ctx); err != nil || slices.Contains(now, p) || len(now) != 3 {
		t.Errorf("after the restart Primaries() = %v, %v; want 3 without node %d", now, err, p)
	}
	info, err := nodeClient(t, c, p).Info(ctx, "replication").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"role:slave", fmt.Sprintf("master_port:%d", c.ports[got-1]), "master_link_status:up"} {
		if !strings.Contains(info, want+"\r\n") {
			t.Errorf("node %d's INFO replication lacks %s:\n%s", p, want, info)
		}
	}
	// The returned replica has what was written while it was dead, and acks
	// what comes next.
	rc := nodeClient(t, c, p).Conn()
	defer rc.Close()
	if err := rc.ReadOnly(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := rc.Get(ctx, key).Result(); err != nil || v != "after" {
		t.Errorf("key on the restarted replica node %d: %q, %v", p, v, err)
	}
	pc := nodeClient(t, c, got).Conn()
	defer pc.Close()
	if err := pc.Set(ctx, key, "again", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := pc.Do(ctx, "WAIT", 1, 1000).Int(); err != nil || n != 1 {
		t.Errorf("WAIT 1 1000 on node %d with node %d its replica again: %d, %v; want 1", got, p, n, err)
	}
}

// nodeClient is a plain client of node n alone (no cluster routing: MOVED
// comes back as an error), closed with the test.
func nodeClient(t testing.TB, c *RedisCluster, n int) *redis.Client {
	t.Helper()
	cl := redis.NewClient(&redis.Options{Addr: c.Addr(n), MaxRetries: -1})
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

func clusterInfo(t testing.TB, cl *redis.Client) map[string]string {
	t.Helper()
	s, err := cl.ClusterInfo(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, l := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), ":"); ok {
			out[k] = v
		}
	}
	return out
}
