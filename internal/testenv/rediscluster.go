package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisClusterSlots is the number of hash slots of a Redis Cluster.
const RedisClusterSlots = 16384

// redisClusterNodeTimeout is the cluster-node-timeout (ms) of a test's
// cluster: a primary is failed over a few seconds after its death.
const redisClusterNodeTimeout = 2000

// RedisCluster is a private Redis Cluster (scripts/redis-cluster.sh: 3
// primaries sharing the 16384 slots, with replicas one replica each; every
// node with AOF, appendfsync always, noeviction, full coverage required)
// that one test owns, so it may kill and restart its nodes.
//
// Nodes are numbered 1 to Nodes() in the order of Addrs. They start with
// nodes 1 to 3 the primaries, but roles change with every failover: ask
// Primaries, PrimaryOf and ReplicaOf, which read them from the cluster.
type RedisCluster struct {
	t        testing.TB
	replicas bool
	ports    []int
	busPorts []int
	dir      string
}

// StartRedisCluster starts a private cluster on free ports (3 nodes, or 6
// with replicas), waits until it has settled (every node cluster_state:ok,
// all agreeing on the roles, every replica's link up), and stops it when
// the test ends. When the test fails, the warnings of each node's log are
// logged. A machine without redis-server gets Debian's (scripts/redis.sh's
// install); where that fails, so does the test.
func StartRedisCluster(t testing.TB, replicas bool) *RedisCluster {
	t.Helper()
	c := &RedisCluster{t: t, replicas: replicas, dir: t.TempDir()}
	nodes := 3
	if replicas {
		nodes = 6
	}
	// Two ports a node (clients, cluster bus), no two alike: FreePort
	// closes its listener, so a later call may get a port again.
	var seen []int
	for len(seen) < 2*nodes {
		if p := FreePort(t); !slices.Contains(seen, p) {
			seen = append(seen, p)
		}
	}
	c.ports, c.busPorts = seen[:nodes], seen[nodes:]
	t.Cleanup(func() {
		_ = c.run(context.Background(), "stop")
		if t.Failed() {
			for n := 1; n <= c.Nodes(); n++ {
				logRedisTrouble(t, fmt.Sprintf("redis cluster node %d (%s)", n, c.Addr(n)), filepath.Join(c.nodeDir(n), "redis.log"))
			}
		}
	})
	if err := c.run(context.Background(), "start"); err != nil {
		t.Fatalf("start private redis cluster: %v", err)
	}
	return c
}

// logRedisTrouble logs the last warnings (Redis' '#' level) of a node's
// log, with the start and kill markers the script and Kill write into it.
func logRedisTrouble(t testing.TB, name, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Logf("%s: no redis.log: %v", name, err)
		return
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, " # ") || strings.HasPrefix(l, "==== ") {
			lines = append(lines, l)
		}
	}
	const keep = 80
	if len(lines) > keep {
		lines = lines[len(lines)-keep:]
	}
	t.Logf("%s, last %d warnings of redis.log:\n%s", name, len(lines), strings.Join(lines, "\n"))
}

// Nodes is the number of nodes: 3, or 6 with replicas.
func (c *RedisCluster) Nodes() int { return len(c.ports) }

// Addrs returns every node's address, node 1 first.
func (c *RedisCluster) Addrs() []string {
	out := make([]string, c.Nodes())
	for i := range out {
		out[i] = c.Addr(i + 1)
	}
	return out
}

// Addr returns node n's address.
func (c *RedisCluster) Addr(n int) string { return fmt.Sprintf("127.0.0.1:%d", c.ports[n-1]) }

// Client returns a cluster client seeded with every node (any live one
// gives it the slot map), closed when t ends.
func (c *RedisCluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// Kill sends SIGKILL to node n and returns once the process is gone: only
// what its AOF had (appendfsync always: every acknowledged write) and what
// its replica received survives. It signals from here, not through the
// script, so a test kills at the moment it chose.
func (c *RedisCluster) Kill(n int) error {
	if err := c.check(n); err != nil {
		return err
	}
	pid, err := c.pid(n)
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill redis cluster node %d (pid %d): %w", n, pid, err)
	}
	err = WaitFor(context.Background(), 10*time.Second, func() error {
		if c.isNode(n, pid) {
			return fmt.Errorf("redis cluster node %d (pid %d) still running after SIGKILL", n, pid)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// The mark the script's kill leaves too, for logRedisTrouble.
	if f, err := os.OpenFile(filepath.Join(c.nodeDir(n), "redis.log"), os.O_APPEND|os.O_WRONLY, 0); err == nil {
		fmt.Fprintf(f, "==== testenv SIGKILL node %d (pid %d) %s\n", n, pid, time.Now().UTC().Format(time.RFC3339Nano))
		f.Close()
	}
	return nil
}

// Restart stops node n if it runs (SIGTERM) and starts it again with its
// config and data, and returns once the cluster has settled with it: it
// rejoined, a killed ex-primary as a replica of the node promoted in its
// place, its link up and in sync.
func (c *RedisCluster) Restart(ctx context.Context, n int) error {
	if err := c.check(n); err != nil {
		return err
	}
	return c.run(ctx, "restart", strconv.Itoa(n))
}

// cutUser is the replication user a cut replica authenticates as: no
// such user exists, so its primary refuses every reconnection at AUTH.
const cutUser = "nofly-testenv-cut"

// Cut stops replica n from receiving its primary's writes while it keeps
// running and answering on the cluster bus: its link to the primary is
// dropped and every reconnection refused at AUTH (masteruser names no
// user). The primary goes on acknowledging writes the replica never gets:
// the lag of a slow or cut-off replica, made exact. (A SIGSTOP would not
// do: writes sent meanwhile wait in the kernel's socket buffers and reach
// the replica after SIGCONT, even from a primary killed in between.) It
// returns once the replica says master_link_status:down; Heal undoes it.
func (c *RedisCluster) Cut(ctx context.Context, n int) error {
	if err := c.check(n); err != nil {
		return err
	}
	err := c.onNode(ctx, n, func(ctx context.Context, cl *redis.Client) error {
		role, err := cl.Do(ctx, "ROLE").Slice()
		if err != nil {
			return err
		}
		if len(role) == 0 || role[0] != "slave" {
			return fmt.Errorf("cut: node %d is not a replica (ROLE %v)", n, role)
		}
		if err := cl.ConfigSet(ctx, "masteruser", cutUser).Err(); err != nil {
			return err
		}
		if err := cl.ConfigSet(ctx, "masterauth", "cut").Err(); err != nil {
			return err
		}
		return cl.ClientKillByFilter(ctx, "TYPE", "master").Err()
	})
	if err != nil {
		return err
	}
	return WaitFor(ctx, 10*time.Second, func() error {
		return c.onNode(ctx, n, func(ctx context.Context, cl *redis.Client) error {
			s, err := cl.Info(ctx, "replication").Result()
			if err != nil {
				return err
			}
			if !strings.Contains(s, "master_link_status:down") {
				return errors.New("cut: link to the primary still up")
			}
			return nil
		})
	})
}

// Heal undoes Cut: node n authenticates to a primary as before (the
// default user, no password). A node promoted meanwhile keeps its role.
func (c *RedisCluster) Heal(ctx context.Context, n int) error {
	if err := c.check(n); err != nil {
		return err
	}
	return c.onNode(ctx, n, func(ctx context.Context, cl *redis.Client) error {
		if err := cl.ConfigSet(ctx, "masteruser", "").Err(); err != nil {
			return err
		}
		return cl.ConfigSet(ctx, "masterauth", "").Err()
	})
}

// Get reads key on node n itself, a replica too (READONLY): what that
// node holds, never redirected. It returns redis.Nil when the node holds
// no such key.
func (c *RedisCluster) Get(ctx context.Context, n int, key string) (string, error) {
	if err := c.check(n); err != nil {
		return "", err
	}
	var v string
	err := c.onNode(ctx, n, func(ctx context.Context, cl *redis.Client) error {
		cn := cl.Conn()
		defer cn.Close()
		if err := cn.Do(ctx, "READONLY").Err(); err != nil {
			return err
		}
		var err error
		v, err = cn.Get(ctx, key).Result()
		return err
	})
	if errors.Is(err, redis.Nil) {
		return "", redis.Nil
	}
	return v, err
}

// Primaries returns the nodes that serve slots as primaries, in order, as
// the first live node sees the cluster now (a node flagged as failing
// does not count).
func (c *RedisCluster) Primaries(ctx context.Context) ([]int, error) {
	_, view, err := c.anyView(ctx)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, v := range view {
		if v.primary() && !v.down() && len(v.slots) > 0 {
			if v.node == 0 {
				return nil, fmt.Errorf("primary %s is not a node of this cluster", v.addr)
			}
			out = append(out, v.node)
		}
	}
	slices.Sort(out)
	return out, nil
}

// PrimaryOf returns the node whose slots hold key's (CLUSTER KEYSLOT), as
// the first live node sees the cluster now: right after a Kill, still the
// dead node (use WaitPromoted for its successor).
func (c *RedisCluster) PrimaryOf(ctx context.Context, key string) (int, error) {
	asked, view, err := c.anyView(ctx)
	if err != nil {
		return 0, err
	}
	slot, err := c.keySlot(ctx, asked, key)
	if err != nil {
		return 0, err
	}
	owner := slotOwner(view, slot)
	if owner == nil {
		return 0, fmt.Errorf("node %d: no primary serves slot %d (of key %q)", asked, slot, key)
	}
	if owner.node == 0 {
		return 0, fmt.Errorf("slot %d (of key %q) is served by %s, not a node of this cluster", slot, key, owner.addr)
	}
	return owner.node, nil
}

// ReplicaOf returns the replica of primary (the lowest-numbered one not
// flagged as failing), as the first live node sees the cluster now.
func (c *RedisCluster) ReplicaOf(ctx context.Context, primary int) (int, error) {
	if err := c.check(primary); err != nil {
		return 0, err
	}
	asked, view, err := c.anyView(ctx)
	if err != nil {
		return 0, err
	}
	var id string
	for _, v := range view {
		if v.node == primary {
			if !v.primary() {
				return 0, fmt.Errorf("node %d says node %d is a replica, not a primary", asked, primary)
			}
			id = v.id
		}
	}
	if id == "" {
		return 0, fmt.Errorf("node %d does not know node %d", asked, primary)
	}
	var out []int
	for _, v := range view {
		if v.flags["slave"] && v.master == id && !v.down() && v.node != 0 {
			out = append(out, v.node)
		}
	}
	if len(out) == 0 {
		return 0, fmt.Errorf("node %d knows no live replica of node %d", asked, primary)
	}
	return slices.Min(out), nil
}

// WaitPromoted waits (up to 2 minutes, or until ctx ends) until a node
// other than notNode serves key's slot as a primary, and returns it: every
// live node says cluster_state:ok and names it the slot's primary, not
// flagged as failing, and it says so of itself.
func (c *RedisCluster) WaitPromoted(ctx context.Context, key string, notNode int) (int, error) {
	asked, _, err := c.anyView(ctx)
	if err != nil {
		return 0, err
	}
	slot, err := c.keySlot(ctx, asked, key)
	if err != nil {
		return 0, err
	}
	var got int
	err = WaitFor(ctx, 2*time.Minute, func() error {
		got = 0
		live := c.live()
		if len(live) == 0 {
			return errors.New("no node of the redis cluster is running")
		}
		for _, n := range live {
			if err := c.stateOK(ctx, n); err != nil {
				return err
			}
			view, err := c.view(ctx, n)
			if err != nil {
				return err
			}
			owner := slotOwner(view, slot)
			switch {
			case owner == nil:
				return fmt.Errorf("node %d: no primary serves slot %d", n, slot)
			case owner.down():
				return fmt.Errorf("node %d: slot %d's primary %s is flagged %s", n, slot, owner.addr, owner.flagList())
			case owner.node == notNode:
				return fmt.Errorf("node %d: slot %d still served by node %d", n, slot, notNode)
			case owner.node == 0:
				return fmt.Errorf("node %d: slot %d served by %s, not a node of this cluster", n, slot, owner.addr)
			case got != 0 && owner.node != got:
				return fmt.Errorf("nodes disagree on slot %d: node %d or %d", slot, got, owner.node)
			}
			got = owner.node
		}
		if !slices.Contains(live, got) {
			return fmt.Errorf("slot %d served by node %d, which is not running", slot, got)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("wait for slot %d (key %q) to move off node %d: %w", slot, key, notNode, err)
	}
	return got, nil
}

// clusterNode is a line of CLUSTER NODES.
type clusterNode struct {
	id     string
	addr   string // host:port
	node   int    // its number in this cluster, 0 if none
	flags  map[string]bool
	master string // the primary's id, for a replica
	slots  [][2]int
}

func (v *clusterNode) primary() bool { return v.flags["master"] }

// down: flagged as failing, by this node alone (fail?) or the cluster (fail).
func (v *clusterNode) down() bool { return v.flags["fail"] || v.flags["fail?"] }

func (v *clusterNode) flagList() string {
	out := make([]string, 0, len(v.flags))
	for f := range v.flags {
		out = append(out, f)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// slotOwner is the primary that view says serves slot, or nil.
func slotOwner(view []clusterNode, slot int) *clusterNode {
	for i := range view {
		if !view[i].primary() {
			continue
		}
		for _, r := range view[i].slots {
			if slot >= r[0] && slot <= r[1] {
				return &view[i]
			}
		}
	}
	return nil
}

// view is the cluster as node n sees it (CLUSTER NODES).
func (c *RedisCluster) view(ctx context.Context, n int) ([]clusterNode, error) {
	var out []clusterNode
	err := c.onNode(ctx, n, func(ctx context.Context, cl *redis.Client) error {
		s, err := cl.ClusterNodes(ctx).Result()
		if err != nil {
			return err
		}
		out, err = c.parseNodes(s)
		return err
	})
	return out, err
}

// parseNodes reads CLUSTER NODES: "id ip:port@cport[,hostname] flags
// master ping-sent pong-recv config-epoch link-state slot...".
func (c *RedisCluster) parseNodes(s string) ([]clusterNode, error) {
	var out []clusterNode
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return nil, fmt.Errorf("CLUSTER NODES line %q", line)
		}
		addr, _, _ := strings.Cut(f[1], "@")
		v := clusterNode{id: f[0], addr: addr, flags: map[string]bool{}, master: f[3]}
		for _, fl := range strings.Split(f[2], ",") {
			v.flags[fl] = true
		}
		if _, p, ok := strings.Cut(addr, ":"); ok {
			if i := slices.Index(c.ports, atoiOr0(p)); i >= 0 && strings.HasPrefix(addr, "127.0.0.1:") {
				v.node = i + 1
			}
		}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") { // a slot being migrated or imported
				continue
			}
			lo, hi, isRange := strings.Cut(r, "-")
			if !isRange {
				hi = lo
			}
			a, errA := strconv.Atoi(lo)
			b, errB := strconv.Atoi(hi)
			if errA != nil || errB != nil {
				return nil, fmt.Errorf("CLUSTER NODES slots %q in line %q", r, line)
			}
			v.slots = append(v.slots, [2]int{a, b})
		}
		out = append(out, v)
	}
	return out, nil
}

func atoiOr0(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0
	}
	return n
}

// anyView is the view of the first live node that answers, and its number.
func (c *RedisCluster) anyView(ctx context.Context) (int, []clusterNode, error) {
	var errs []error
	for _, n := range c.live() {
		view, err := c.view(ctx, n)
		if err == nil {
			return n, view, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return 0, nil, errors.New("no node of the redis cluster is running")
	}
	return 0, nil, fmt.Errorf("no live node answers CLUSTER NODES: %w", errors.Join(errs...))
}

func (c *RedisCluster) keySlot(ctx context.Context, n int, key string) (int, error) {
	var slot int64
	err := c.onNode(ctx, n, func(ctx context.Context, cl *redis.Client) error {
		var err error
		slot, err = cl.ClusterKeySlot(ctx, key).Result()
		return err
	})
	return int(slot), err
}

// stateOK is nil when node n says cluster_state:ok.
func (c *RedisCluster) stateOK(ctx context.Context, n int) error {
	return c.onNode(ctx, n, func(ctx context.Context, cl *redis.Client) error {
		s, err := cl.ClusterInfo(ctx).Result()
		if err != nil {
			return err
		}
		for _, l := range strings.Split(s, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), "cluster_state:"); ok {
				if v != "ok" {
					return fmt.Errorf("cluster_state is %s", v)
				}
				return nil
			}
		}
		return errors.New("CLUSTER INFO has no cluster_state")
	})
}

// onNode runs f with a plain client of node n (no retries, short timeouts:
// a dead node must not hold up a wait), closed after.
func (c *RedisCluster) onNode(ctx context.Context, n int, f func(context.Context, *redis.Client) error) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cl := redis.NewClient(&redis.Options{Addr: c.Addr(n), MaxRetries: -1, DialTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second})
	defer cl.Close()
	if err := f(ctx, cl); err != nil {
		return fmt.Errorf("redis cluster node %d (%s): %w", n, c.Addr(n), err)
	}
	return nil
}

// live returns the nodes whose process runs.
func (c *RedisCluster) live() []int {
	var out []int
	for n := 1; n <= c.Nodes(); n++ {
		if _, err := c.pid(n); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// pid returns node n's process id from its pid file, checked to be that
// node's redis-server (a recycled pid is never signalled).
func (c *RedisCluster) pid(n int) (int, error) {
	b, err := os.ReadFile(filepath.Join(c.nodeDir(n), "redis.pid"))
	if err != nil {
		return 0, fmt.Errorf("redis cluster node %d: %w", n, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("redis cluster node %d: pid file: %w", n, err)
	}
	if !c.isNode(n, pid) {
		return 0, fmt.Errorf("redis cluster node %d (pid %d) is not running", n, pid)
	}
	return pid, nil
}

// isNode reports whether pid runs node n: its process title (the script's
// proc-title-template) names the node's address and config file. A zombie
// has no command line, so a killed node not yet reaped counts as gone.
func (c *RedisCluster) isNode(n, pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	want := "redis-server " + c.Addr(n) + " " + filepath.Join(c.nodeDir(n), "redis.conf")
	return strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), want)
}

func (c *RedisCluster) check(n int) error {
	if n < 1 || n > c.Nodes() {
		return fmt.Errorf("testenv: redis cluster nodes are numbered 1 to %d, not %d", c.Nodes(), n)
	}
	return nil
}

func (c *RedisCluster) nodeDir(n int) string { return filepath.Join(c.dir, "node-"+strconv.Itoa(n)) }

func (c *RedisCluster) run(ctx context.Context, verb string, args ...string) error {
	join := func(ps []int) string {
		s := make([]string, len(ps))
		for i, p := range ps {
			s[i] = strconv.Itoa(p)
		}
		return strings.Join(s, ",")
	}
	replicas := "0"
	if c.replicas {
		replicas = "1"
	}
	return runScriptArgs(ctx, "redis-cluster.sh", append([]string{verb}, args...),
		"REDIS_CLUSTER_PORTS="+join(c.ports),
		"REDIS_CLUSTER_BUS_PORTS="+join(c.busPorts),
		"REDIS_CLUSTER_DIR="+c.dir,
		"REDIS_CLUSTER_REPLICAS="+replicas,
		"REDIS_CLUSTER_NODE_TIMEOUT="+strconv.Itoa(redisClusterNodeTimeout))
}
