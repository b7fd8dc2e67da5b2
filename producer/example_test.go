package producer_test

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/nofly-dev/nofly/producer"
)

// The ingest service: one Produce per HTTP request, 202 only on nil.
func ExampleProducer_Produce() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := producer.New(ctx, producer.Config{
		Brokers:         []string{"127.0.0.1:9092"},
		Topic:           "telemetry.positions",
		DeliveryTimeout: 10 * time.Second, // shorter than the HTTP client's timeout
	})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(context.Background())

	err = p.Produce(ctx, []producer.Record{
		producer.NewRecord([]byte("UAV-0042"), []byte(`{"drone_id":"UAV-0042","seq":1187}`)),
	})
	var pe *producer.ProduceError
	switch {
	case err == nil:
		// 202 Accepted
	case errors.Is(err, producer.ErrBrokerUnavailable), producer.Retriable(err):
		// 503 with Retry-After
	case errors.As(err, &pe):
		log.Printf("records %v not acknowledged: %v", pe.Indexes(), err) // 500
	}
}
