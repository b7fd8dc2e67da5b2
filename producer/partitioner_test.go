package producer

import "testing"

// TestPartitionerMatchesJavaClient checks murmur2 partitioning against the
// Java client. The hashes are the vectors of Apache Kafka's
// clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java
// (testMurmur2: "21" -> -973932308, ...); the Java default partitioner
// picks Utils.toPositive(murmur2(key)) % numPartitions, so the expected
// partition is (hash & 0x7fffffff) % n.
func TestPartitionerMatchesJavaClient(t *testing.T) {
	vectors := []struct {
		key  string
		hash int32
	}{
		{"21", -973932308},
		{"foobar", -790332482},
		{"a-little-bit-long-string", -985981536},
		{"a-little-bit-longer-string", -1486304829},
		{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
		{"abc", 479470107},
	}
	for _, n := range []int{1, 3, 8, 12, 100} {
		p := newPartitioner(n)
		for _, v := range vectors {
			want := int((uint32(v.hash) & 0x7fffffff) % uint32(n))
			if got := p.partition([]byte(v.key)); got != want {
				t.Errorf("n=%d key %q: partition %d, want %d", n, v.key, got, want)
			}
		}
	}
	// An empty key is a key (Java hashes it), not "no key".
	p := newPartitioner(17)
	if a, b := p.partition([]byte{}), p.partition([]byte{}); a != b {
		t.Errorf("empty key maps to %d then %d", a, b)
	}
}
