package producer

import "github.com/segmentio/kafka-go"

// partitioner maps keys to partitions as the Java client's default
// partitioner does: toPositive(murmur2(key)) % numPartitions. kafka-go's
// Murmur2Balancer implements exactly that for non-nil keys; Consistent keeps
// it from picking a random partition for an empty key.
type partitioner struct {
	balancer   kafka.Murmur2Balancer
	partitions []int // 0..n-1, what Balance chooses from
}

func newPartitioner(n int) *partitioner {
	p := &partitioner{balancer: kafka.Murmur2Balancer{Consistent: true}, partitions: make([]int, n)}
	for i := range p.partitions {
		p.partitions[i] = i
	}
	return p
}

func (p *partitioner) partition(key []byte) int {
	return p.balancer.Balance(kafka.Message{Key: key}, p.partitions...)
}
