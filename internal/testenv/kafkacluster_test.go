//go:build cluster

package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/internal/kafkatopic"
)

// TestClusterSettingsAndNodeControl: the cluster scripts/kafka-cluster.sh
// starts has the settings the cluster proofs rely on, as each node reports
// them (not as the script says), a topic created with the broker's default
// gets 3 in-sync replicas, and the helpers do what they say: a graceful
// stop hands the leadership over at once, a SIGKILL moves it once the
// controller fences the node, and a restarted node rejoins every ISR.
func TestClusterSettingsAndNodeControl(t *testing.T) {
	t.Parallel() // servers of its own on free ports; the step mostly waits on them
	ctx := context.Background()
	k := StartKafkaCluster(t)
	want := map[string]string{
		"default.replication.factor":               "3",
		"min.insync.replicas":                      "2",
		"unclean.leader.election.enable":           "false",
		"offsets.topic.replication.factor":         "3",
		"transaction.state.log.replication.factor": "3",
		"transaction.state.log.min.isr":            "2",
		"group.initial.rebalance.delay.ms":         "0",
		"auto.create.topics.enable":                "false",
	}
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	for n := 1; n <= ClusterNodes; n++ {
		c := &kafka.Client{Addr: kafka.TCP(k.Broker(n)), Timeout: 10 * time.Second, Transport: &kafka.Transport{}}
		res, err := c.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
			ResourceType: kafka.ResourceTypeBroker, ResourceName: fmt.Sprint(n), ConfigNames: names,
		}}})
		c.Transport.(*kafka.Transport).CloseIdleConnections()
		if err != nil {
			t.Fatalf("node %d: describe configs: %v", n, err)
		}
		got := map[string]string{}
		for _, r := range res.Resources {
			if r.Error != nil {
				t.Fatalf("node %d: %v", n, r.Error)
			}
			for _, e := range r.ConfigEntries {
				got[e.ConfigName] = e.ConfigValue
			}
		}
		for name, v := range want {
			if got[name] != v {
				t.Errorf("node %d: %s = %q, want %q", n, name, got[name], v)
			}
		}
	}

	// The broker's default replication, as the alerter creates its events topic.
	topic := UniqueName("cluster-default-rf")
	if _, err := kafkatopic.Ensure(ctx, k.Brokers(), kafkatopic.Spec{Name: topic, Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	if err := k.WaitInSync(ctx, topic); err != nil {
		t.Fatal(err)
	}

	leader, err := k.Leader(ctx, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Stop(ctx, leader); err != nil {
		t.Fatal(err)
	}
	if l, err := k.Leader(ctx, topic, 0); err != nil || l == leader {
		t.Errorf("after a graceful stop of node %d, partition 0's leader is %d (%v): the leadership was not handed over", leader, l, err)
	}
	if err := k.Start(ctx, leader); err != nil {
		t.Fatal(err)
	}
	if err := k.WaitInSync(ctx, topic); err != nil {
		t.Fatal(err)
	}

	victim, err := k.Leader(ctx, topic, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Kill(victim); err != nil {
		t.Fatal(err)
	}
	if err := k.Kill(victim); err == nil {
		t.Error("a second Kill of a dead node succeeded")
	}
	killed := time.Now()
	CheckFor(t, time.Minute, func() error {
		l, err := k.Leader(ctx, topic, 1)
		if err == nil && l == victim {
			err = fmt.Errorf("partition 1 still led by the killed node %d", victim)
		}
		return err
	})
	t.Logf("SIGKILL of node %d: leadership moved after %v", victim, time.Since(killed).Round(time.Millisecond))
	if err := k.InSync(ctx, topic); err == nil {
		t.Error("every replica in sync with a node dead")
	}
	if err := k.Restart(ctx, victim); err != nil {
		t.Fatal(err)
	}
	if err := k.WaitInSync(ctx, topic); err != nil {
		t.Fatal(err)
	}
	t.Logf("node %d back in every ISR %v after the kill", victim, time.Since(killed).Round(time.Millisecond))

	// The first FindCoordinator creates the transaction state topic;
	// until its partitions have leaders the answer is "not available".
	txnID := UniqueName("txn")
	CheckFor(t, time.Minute, func() error {
		coord, err := k.Coordinator(ctx, txnID)
		if err == nil && (coord < 1 || coord > ClusterNodes) {
			err = fmt.Errorf("transaction coordinator %d", coord)
		}
		return err
	})
	cur, peak, err := k.RSS()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("RSS of the nodes %d, %d, %d MiB; peaks %d, %d, %d MiB", cur[0]>>20, cur[1]>>20, cur[2]>>20, peak[0]>>20, peak[1]>>20, peak[2]>>20)
}
