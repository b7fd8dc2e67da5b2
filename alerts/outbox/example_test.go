package outbox_test

import (
	"context"
	"log"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/alerts/outbox"
	"github.com/nofly-dev/nofly/producer"
)

// A dispatcher for the partitions an alerter owns: Kafka exactly once, one
// webhook at least once. Run each owned partition until it is revoked.
func Example() {
	ctx, revoke := context.WithCancel(context.Background())
	defer revoke()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"}) // the dispatcher's own pool
	brokers := []string{"127.0.0.1:9092"}
	d, err := outbox.NewDispatcher(outbox.Config{
		Topic: "telemetry.positions",
		Webhooks: []outbox.Webhook{
			{Name: "ops", URL: "https://ops.example.test/nofly", Timeout: 5 * time.Second, MaxAttempts: 12},
		},
		Registerer: prometheus.DefaultRegisterer,
	}, rdb, outbox.NewKafkaOutput(brokers, "alerts.events", producer.Config{}))
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range []int{0, 1, 2} { // the assigned partitions
		go func() {
			if err := d.Run(ctx, p); err != nil {
				log.Print(err)
			}
		}()
	}
}
