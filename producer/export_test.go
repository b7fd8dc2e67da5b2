package producer

// WithBatchAcked returns cfg with f told the record count of every batch the
// broker acknowledges, for benchmarks in package producer_test.
func WithBatchAcked(cfg Config, f func(records int)) Config {
	cfg.batchAcked = f
	return cfg
}
