package producer

// WithBatchAcked returns cfg with f told the record count of every batch the
// broker acknowledges, for benchmarks in package producer_test.
func WithBatchAcked(cfg Config, f func(records int)) Config {
	cfg.batchAcked = f
	return cfg
}

// WithRequestPerBatch returns cfg sending each partition batch in a
// Produce request of its own, as before request.go (side-by-side
// benchmarks in package producer_test).
func WithRequestPerBatch(cfg Config) Config {
	cfg.perPartitionRequests = true
	return cfg
}
