package testenv_test

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/internal/testenv"
)

// TestCreateTopicKeepsOldRecords: the topics tests create have no retention
// by time, so records stamped days ago (the scenarios' receive times) stay
// in the log while the test reads it back; the broker's default would
// delete them at its next retention check.
func TestCreateTopicKeepsOldRecords(t *testing.T) {
	brokers := testenv.Kafka(t)
	topic := testenv.CreateTopic(t, brokers, 1)
	c := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	res, err := c.DescribeConfigs(context.Background(), &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: topic, ConfigNames: []string{"retention.ms"},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	got := "(absent)"
	for _, r := range res.Resources {
		if r.Error != nil {
			t.Fatalf("describe %s: %v", topic, r.Error)
		}
		for _, e := range r.ConfigEntries {
			if e.ConfigName == "retention.ms" {
				got = e.ConfigValue
			}
		}
	}
	if got != "-1" {
		t.Errorf("topic %s retention.ms = %s, want -1", topic, got)
	}
}
