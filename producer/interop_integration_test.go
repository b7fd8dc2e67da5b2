package producer

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/segmentio/kafka-go"
)

// interopCodecs: one producer per codec, each writing its own partition.
var interopCodecs = []kafka.Compression{0, kafka.Gzip, kafka.Snappy, kafka.Lz4, kafka.Zstd}

const (
	interopRecords = 12
	interopBatch   = 5 // so each partition gets batches with base sequences 0, 5, 10
)

type interopRecord struct {
	key, value string
	ts         int64 // ms
	headers    string
}

func (r interopRecord) String() string {
	return fmt.Sprintf("%s|%s|%d|%s", r.key, r.value, r.ts, r.headers)
}

func headerString(hs []Header) string {
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = h.Key + "=" + string(h.Value)
	}
	return strings.Join(parts, ",")
}

// TestInteropReadersAndBrokerDump writes records with every codec and reads
// them back with kafka-go's Reader and with kcat (librdkafka), comparing
// keys, values, timestamps and headers, then runs the broker's own
// DumpLogSegments on the segment files: it must show our producer id, epoch
// and the base sequences we sent, and valid CRCs.
func TestInteropReadersAndBrokerDump(t *testing.T) {
	t.Parallel() // its own broker: its start-up overlaps the shared-broker tests
	k := testenv.StartKafka(t)
	brokers := k.Brokers()
	topic := testenv.CreateTopic(t, brokers, len(interopCodecs))

	t0 := time.Now().Truncate(time.Millisecond).Add(-time.Hour)
	want := make(map[int][]interopRecord)
	pids := make(map[int]Stats)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for pt, codec := range interopCodecs {
		p := newTestProducer(t, Config{Brokers: brokers, Topic: topic, Compression: codec, BatchMaxRecords: interopBatch})
		recs := make([]Record, interopRecords)
		for i := range recs {
			recs[i] = Record{
				Key:       []byte(fmt.Sprintf("UAV-%d-%d", pt, i)),
				Value:     []byte(fmt.Sprintf(`{"codec":"%s","seq":%d}`, codec, i)),
				Time:      t0.Add(time.Duration(pt*100+i) * time.Millisecond),
				Headers:   []Header{{Key: "source", Value: []byte("feed-a")}, {Key: "n", Value: []byte(strconv.Itoa(i))}},
				Partition: pt,
			}
			want[pt] = append(want[pt], interopRecord{string(recs[i].Key), string(recs[i].Value), recs[i].Time.UnixMilli(), headerString(recs[i].Headers)})
		}
		if err := p.Produce(ctx, recs); err != nil {
			t.Fatalf("codec %s: %v", codec, err)
		}
		pids[pt] = p.Stats()
	}

	t.Run("kafka-go Reader", func(t *testing.T) {
		for pt := range interopCodecs {
			r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: topic, Partition: pt, MaxWait: 200 * time.Millisecond})
			var got []interopRecord
			for len(got) < interopRecords {
				m, err := r.ReadMessage(ctx)
				if err != nil {
					t.Fatalf("partition %d: %v", pt, err)
				}
				var hs []Header
				for _, h := range m.Headers {
					hs = append(hs, Header{Key: h.Key, Value: h.Value})
				}
				got = append(got, interopRecord{string(m.Key), string(m.Value), m.Time.UnixMilli(), headerString(hs)})
			}
			r.Close()
			if fmt.Sprint(got) != fmt.Sprint(want[pt]) {
				t.Errorf("partition %d (%s):\n got %v\nwant %v", pt, interopCodecs[pt], got, want[pt])
			}
		}
	})

	t.Run("kcat", func(t *testing.T) {
		out, err := exec.CommandContext(ctx, "kcat", "-C", "-b", brokers[0], "-t", topic, "-e", "-q",
			"-f", `%p|%k|%s|%T|%h\n`).Output()
		if err != nil {
			t.Fatalf("kcat (installed by scripts/services.sh): %v", err)
		}
		got := make(map[int][]interopRecord)
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Split(line, "|")
			if len(f) != 5 {
				t.Fatalf("kcat line %q", line)
			}
			pt, _ := strconv.Atoi(f[0])
			ts, _ := strconv.ParseInt(f[3], 10, 64)
			got[pt] = append(got[pt], interopRecord{f[1], f[2], ts, f[4]})
		}
		for pt := range interopCodecs {
			if fmt.Sprint(got[pt]) != fmt.Sprint(want[pt]) {
				t.Errorf("partition %d (%s):\n got %v\nwant %v", pt, interopCodecs[pt], got[pt], want[pt])
			}
		}
	})

	t.Run("DumpLogSegments", func(t *testing.T) {
		libs := testenv.KafkaLibs(t)
		batchLine := regexp.MustCompile(`baseOffset: \d+ lastOffset: \d+ count: (\d+) baseSequence: (-?\d+) lastSequence: (-?\d+) producerId: (-?\d+) producerEpoch: (-?\d+)`)
		for pt, codec := range interopCodecs {
			segs, _ := filepath.Glob(filepath.Join(k.DataDir(), fmt.Sprintf("%s-%d", topic, pt), "*.log"))
			if len(segs) == 0 {
				t.Fatalf("no segment for partition %d under %s", pt, k.DataDir())
			}
			sort.Strings(segs)
			out := dumpLogSegments(t, libs, segs)
			var seqs []string
			for _, m := range batchLine.FindAllStringSubmatch(out, -1) {
				if m[4] != strconv.FormatInt(pids[pt].ProducerID, 10) || m[5] != strconv.Itoa(int(pids[pt].Epoch)) {
					t.Errorf("partition %d: batch of producer %s epoch %s, want %d/%d", pt, m[4], m[5], pids[pt].ProducerID, pids[pt].Epoch)
				}
				seqs = append(seqs, m[2])
			}
			if got := strings.Join(seqs, ","); got != "0,5,10" {
				t.Errorf("partition %d (%s): base sequences %q, want 0,5,10\n%s", pt, codec, got, out)
			}
			// "crcValid: true" before Kafka 4, "isvalid: true" since.
			if strings.Contains(out, "crcValid: false") || strings.Contains(out, "isvalid: false") ||
				strings.Count(out, "crcValid: true")+strings.Count(out, "isvalid: true") != len(seqs) {
				t.Errorf("partition %d: CRC not valid:\n%s", pt, out)
			}
			wantCodec := "compresscodec: " + strings.ToUpper(codecName(codec))
			if !strings.Contains(strings.ToUpper(out), strings.ToUpper(wantCodec)) {
				t.Errorf("partition %d: %q not in dump:\n%s", pt, wantCodec, out)
			}
		}
	})
}

func codecName(c kafka.Compression) string {
	if c == 0 {
		return "none"
	}
	return c.String()
}

// dumpLogSegments runs the broker's DumpLogSegments tool. Kafka 4.x moved it
// from kafka.tools to org.apache.kafka.tools; try the historical name first.
func dumpLogSegments(t *testing.T, libs string, files []string) string {
	t.Helper()
	var errs []string
	for _, class := range []string{"kafka.tools.DumpLogSegments", "org.apache.kafka.tools.DumpLogSegments"} {
		args := []string{"-cp", libs + "/*", class, "--print-data-log", "--files", strings.Join(files, ",")}
		cmd := exec.Command("java", args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		cmd.Env = append(os.Environ(), "KAFKA_LOG4J_OPTS=")
		out, err := cmd.Output()
		if err == nil && strings.Contains(string(out), "baseOffset:") {
			t.Logf("%s: %d bytes of output", class, len(out))
			return string(out)
		}
		errs = append(errs, fmt.Sprintf("%s: %v %s", class, err, firstLine(stderr.String())))
	}
	t.Fatalf("DumpLogSegments: %s", strings.Join(errs, "; "))
	return ""
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
