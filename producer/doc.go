// Package producer is an idempotent Kafka producer built on kafka-go's
// protocol client (kafka-go has no idempotent writer, its issue #233).
//
// Full documentation follows in this file once the behaviour is pinned by
// tests; the API (Record, Config, New, Produce, Close, Stats, ProduceError
// and the sentinel errors) is stable.
package producer
