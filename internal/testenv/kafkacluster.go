package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/internal/kafkatopic"
)

// ClusterNodes is the size of a KafkaCluster. Nodes are numbered 1 to
// ClusterNodes, their Kafka node.id, so a partition's leader as the
// metadata names it is the node to kill.
const ClusterNodes = 3

// KafkaCluster is a private 3-node KRaft cluster (scripts/kafka-cluster.sh:
// each node broker and controller, replication factor 3 by default,
// min.insync.replicas 2, unclean leader election off) that one test owns,
// so it may kill and restart its nodes.
type KafkaCluster struct {
	t        testing.TB
	ports    [ClusterNodes]int
	ctlPorts [ClusterNodes]int
	dir      string
	props    []string
}

// StartKafkaCluster starts a private 3-node cluster on free ports, with
// props added to every node's server.properties, waits until each node's
// metadata shows the three brokers, and stops it when the test ends. When
// the test fails, the warnings and errors of each node's log are logged.
func StartKafkaCluster(t testing.TB, props ...string) *KafkaCluster {
	t.Helper()
	c := &KafkaCluster{t: t, dir: t.TempDir(), props: props}
	for i := range ClusterNodes {
		c.ports[i], c.ctlPorts[i] = FreePort(t), FreePort(t)
	}
	t.Cleanup(func() {
		_ = c.run(context.Background(), "stop")
		if t.Failed() {
			for n := 1; n <= ClusterNodes; n++ {
				logKafkaTrouble(t, fmt.Sprintf("cluster node %d (%s)", n, c.Broker(n)), filepath.Join(c.nodeDir(n), "server.log"))
			}
		}
	})
	if err := c.run(context.Background(), "start"); err != nil {
		t.Fatalf("start private kafka cluster: %v", err)
	}
	return c
}

// Brokers returns the three nodes' addresses.
func (c *KafkaCluster) Brokers() []string {
	out := make([]string, ClusterNodes)
	for i := range out {
		out[i] = c.Broker(i + 1)
	}
	return out
}

// Broker returns node n's address.
func (c *KafkaCluster) Broker(n int) string { return fmt.Sprintf("127.0.0.1:%d", c.ports[n-1]) }

// Kill sends SIGKILL to node n and returns once the process is gone. It
// signals from here, not through the script: a test that kills at a
// moment it observed (a transaction open) must not lose tens of
// milliseconds to starting bash.
func (c *KafkaCluster) Kill(n int) error {
	if err := checkNode(n); err != nil {
		return err
	}
	pid, err := c.pid(n)
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill node %d (pid %d): %w", n, pid, err)
	}
	err = WaitFor(context.Background(), 10*time.Second, func() error {
		if c.isNode(n, pid) {
			return fmt.Errorf("node %d (pid %d) still running after SIGKILL", n, pid)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// The mark the script's kill leaves too, for logKafkaTrouble.
	if f, err := os.OpenFile(filepath.Join(c.nodeDir(n), "server.log"), os.O_APPEND|os.O_WRONLY, 0); err == nil {
		fmt.Fprintf(f, "==== testenv SIGKILL node %d (pid %d) %s\n", n, pid, time.Now().UTC().Format(time.RFC3339Nano))
		f.Close()
	}
	return nil
}

// pid returns node n's process id from its pid file, checked to be that
// node's JVM (a recycled pid is never signalled).
func (c *KafkaCluster) pid(n int) (int, error) {
	b, err := os.ReadFile(filepath.Join(c.nodeDir(n), "kafka.pid"))
	if err != nil {
		return 0, fmt.Errorf("node %d: %w", n, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("node %d: pid file: %w", n, err)
	}
	if !c.isNode(n, pid) {
		return 0, fmt.Errorf("node %d (pid %d) is not running", n, pid)
	}
	return pid, nil
}

// isNode reports whether pid runs node n's JVM; a zombie has no command
// line, so a killed node not yet reaped counts as gone (as the scripts'
// pid_alive has it).
func (c *KafkaCluster) isNode(n, pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	return strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), "kafka.Kafka "+filepath.Join(c.nodeDir(n), "server.properties"))
}

// Stop stops node n gracefully (SIGTERM: it hands its leaderships over).
func (c *KafkaCluster) Stop(ctx context.Context, n int) error {
	if err := checkNode(n); err != nil {
		return err
	}
	return c.run(ctx, "stop", strconv.Itoa(n))
}

// Start starts node n again on its data, and returns once it sees the
// three brokers (registered and caught up with the cluster's metadata; its
// replicas may still be catching up: see WaitInSync).
func (c *KafkaCluster) Start(ctx context.Context, n int) error {
	if err := checkNode(n); err != nil {
		return err
	}
	return c.run(ctx, "start", strconv.Itoa(n))
}

// Restart stops node n if it runs (gracefully) and starts it again.
func (c *KafkaCluster) Restart(ctx context.Context, n int) error {
	if err := checkNode(n); err != nil {
		return err
	}
	return c.run(ctx, "restart", strconv.Itoa(n))
}

// Leader returns the node that leads the partition as the cluster's
// metadata says now.
func (c *KafkaCluster) Leader(ctx context.Context, topic string, partition int) (int, error) {
	parts, err := c.partitions(ctx, topic)
	if err != nil {
		return 0, err
	}
	for _, p := range parts {
		if p.ID == partition {
			if p.Error != nil {
				return 0, fmt.Errorf("%s/%d: %w", topic, partition, p.Error)
			}
			if p.Leader.ID <= 0 {
				return 0, fmt.Errorf("%s/%d has no leader", topic, partition)
			}
			return p.Leader.ID, nil
		}
	}
	return 0, fmt.Errorf("%s/%d not in the metadata", topic, partition)
}

// Coordinator returns the node that is the transaction coordinator of
// transactionalID (FindCoordinator, key type transaction).
func (c *KafkaCluster) Coordinator(ctx context.Context, transactionalID string) (int, error) {
	return c.coordinator(ctx, transactionalID, kafka.CoordinatorKeyTypeTransaction)
}

// GroupCoordinator returns the node that coordinates the consumer group.
func (c *KafkaCluster) GroupCoordinator(ctx context.Context, group string) (int, error) {
	return c.coordinator(ctx, group, kafka.CoordinatorKeyTypeConsumer)
}

func (c *KafkaCluster) coordinator(ctx context.Context, key string, typ kafka.CoordinatorKeyType) (int, error) {
	return c.withClient(ctx, func(ctx context.Context, cl *kafka.Client) (int, error) {
		res, err := cl.FindCoordinator(ctx, &kafka.FindCoordinatorRequest{Key: key, KeyType: typ})
		if err != nil {
			return 0, err
		}
		if res.Error != nil {
			return 0, fmt.Errorf("find coordinator of %s: %w", key, res.Error)
		}
		return res.Coordinator.NodeID, nil
	})
}

// InSync is nil when every partition of topic has a leader and its
// ClusterNodes replicas all in the ISR.
func (c *KafkaCluster) InSync(ctx context.Context, topic string) error {
	parts, err := c.partitions(ctx, topic)
	if err != nil {
		return err
	}
	if len(parts) == 0 {
		return fmt.Errorf("topic %s: no partitions in the metadata", topic)
	}
	var behind []string
	for _, p := range parts {
		if p.Error != nil || p.Leader.ID <= 0 || len(p.Replicas) != ClusterNodes || len(p.Isr) != ClusterNodes {
			behind = append(behind, fmt.Sprintf("p%d leader %d replicas %v isr %v (%v)", p.ID, p.Leader.ID, ids(p.Replicas), ids(p.Isr), p.Error))
		}
	}
	if len(behind) > 0 {
		return fmt.Errorf("topic %s not in sync: %s", topic, strings.Join(behind, "; "))
	}
	return nil
}

// WaitInSync waits (up to 3 minutes, or until ctx ends) until every
// partition of topic has its ClusterNodes replicas in the ISR: a restarted
// node has caught up and a later kill of any one node keeps min.insync.
func (c *KafkaCluster) WaitInSync(ctx context.Context, topic string) error {
	return WaitFor(ctx, 3*time.Minute, func() error { return c.InSync(ctx, topic) })
}

// CreateTopic creates a uniquely named topic with the given partition count
// and replication factor 3, and waits until all its replicas are in sync.
// It goes with the cluster (no deletion at the end).
func (c *KafkaCluster) CreateTopic(t testing.TB, partitions int) string {
	t.Helper()
	topic := UniqueName(topicSafe(t.Name()))
	if len(topic) > 200 {
		topic = UniqueName("t")
	}
	ctx := context.Background()
	if _, err := kafkatopic.Ensure(ctx, c.Brokers(), kafkatopic.Spec{Name: topic, Partitions: partitions, Replication: ClusterNodes, Configs: TopicConfigs}); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	if err := c.WaitInSync(ctx, topic); err != nil {
		t.Fatal(err)
	}
	return topic
}

// RSS returns each running node's resident set size and its peak (VmRSS,
// VmHWM of /proc, in bytes; the peak since the node's last start).
func (c *KafkaCluster) RSS() (cur, peak [ClusterNodes]int64, err error) {
	for n := 1; n <= ClusterNodes; n++ {
		pid, err := c.pid(n)
		if err != nil {
			return cur, peak, err
		}
		st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		if err != nil {
			return cur, peak, fmt.Errorf("node %d: %w", n, err)
		}
		for _, l := range strings.Split(string(st), "\n") {
			f := strings.Fields(l)
			if len(f) != 3 || f[2] != "kB" {
				continue
			}
			v, _ := strconv.ParseInt(f[1], 10, 64)
			switch f[0] {
			case "VmRSS:":
				cur[n-1] = v << 10
			case "VmHWM:":
				peak[n-1] = v << 10
			}
		}
	}
	return cur, peak, nil
}

func (c *KafkaCluster) partitions(ctx context.Context, topic string) ([]kafka.Partition, error) {
	var parts []kafka.Partition
	_, err := c.withClient(ctx, func(ctx context.Context, cl *kafka.Client) (int, error) {
		res, err := cl.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
		if err != nil {
			return 0, err
		}
		for _, tp := range res.Topics {
			if tp.Name == topic {
				if tp.Error != nil {
					return 0, fmt.Errorf("topic %s: %w", topic, tp.Error)
				}
				parts = tp.Partitions
				return 0, nil
			}
		}
		return 0, fmt.Errorf("topic %s not in the metadata", topic)
	})
	return parts, err
}

// withClient runs f with a client on a transport of its own: kafka-go's
// Client answers Metadata from its transport's cache, and a question about
// a leader that just moved needs the cluster's answer of now.
func (c *KafkaCluster) withClient(ctx context.Context, f func(context.Context, *kafka.Client) (int, error)) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	return f(ctx, &kafka.Client{Addr: kafka.TCP(c.Brokers()...), Timeout: 10 * time.Second, Transport: tr})
}

func ids(bs []kafka.Broker) []int {
	out := make([]int, len(bs))
	for i, b := range bs {
		out[i] = b.ID
	}
	return out
}

func checkNode(n int) error {
	if n < 1 || n > ClusterNodes {
		return errors.New("testenv: cluster nodes are numbered 1 to 3, not " + strconv.Itoa(n))
	}
	return nil
}

func (c *KafkaCluster) nodeDir(n int) string { return filepath.Join(c.dir, "node-"+strconv.Itoa(n)) }

func (c *KafkaCluster) run(ctx context.Context, verb string, args ...string) error {
	join := func(ps [ClusterNodes]int) string {
		s := make([]string, len(ps))
		for i, p := range ps {
			s[i] = strconv.Itoa(p)
		}
		return strings.Join(s, ",")
	}
	return runScriptArgs(ctx, "kafka-cluster.sh", append([]string{verb}, args...),
		"KAFKA_CLUSTER_PORTS="+join(c.ports),
		"KAFKA_CLUSTER_CONTROLLER_PORTS="+join(c.ctlPorts),
		"KAFKA_CLUSTER_DIR="+c.dir,
		"KAFKA_HEAP_OPTS=-Xms128m -Xmx512m",
		"KAFKA_EXTRA_PROPS="+strings.Join(c.props, "\n"))
}
