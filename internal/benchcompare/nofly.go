package benchcompare

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/internal/committed"
	"github.com/nofly-dev/nofly/internal/redislayout"
)

// noflyRound is one run of the stream through nofly: ingest and the alerter
// started as subprocesses on topics, a group and a Redis prefix of the
// round's own; the clients POST their batches; the stream has been
// delivered when alerts.events, read as a read_committed consumer reads it,
// holds as many events as the reference.
type noflyRound struct {
	bin        string // directory of the ingest and alerter binaries
	logDir     string
	brokers    string
	redis      string
	partitions int
	zonesFile  string
	runID      string
	bodies     [][][]byte
	counts     [][]int
	expected   int
	smp        *sampler // filled with ingest's and the alerter's pids here
	ingestIdx  int      // their places in smp
	alerterIdx int
}

func (n *noflyRound) run(ctx context.Context) (res roundResult, err error) {
	topic := n.runID + ".telemetry.positions"
	eventsTopic := n.runID + ".alerts.events"
	ingestAddr, alerterAddr := freeAddr(), freeAddr()
	// Flags, not NOFLY_* variables: a flag the command no longer has stops
	// it at start, and flags win over the shell's NOFLY_* variables.
	common := []string{"--brokers=" + n.brokers, "--topic=" + topic,
		"--partitions=" + strconv.Itoa(n.partitions), "--log-level=warn"}
	ingest, err := startProc(filepath.Join(n.bin, "ingest"), append([]string{"serve", "--addr=" + ingestAddr}, common...),
		filepath.Join(n.logDir, n.runID+".ingest.log"))
	if err != nil {
		return res, err
	}
	defer ingest.stop()
	alerter, err := startProc(filepath.Join(n.bin, "alerter"), append([]string{"serve", "--redis=" + n.redis,
		"--redis-prefix=" + n.runID, "--group=" + n.runID, "--zones=" + n.zonesFile,
		"--events-topic=" + eventsTopic, "--http=" + alerterAddr,
		// A run's audit trail stays in its own Redis prefix: the shared
		// default topic holds earlier runs' trails, which the alerter
		// rightly refuses to continue.
		"--audit-topic=",
		// Tile38 detects enter and exit only: both sides decide the same
		// (replay below too), and the events compare one to one.
		"--approach-before=off"}, common...),
		filepath.Join(n.logDir, n.runID+".alerter.log"))
	if err != nil {
		return res, err
	}
	defer alerter.stop()
	defer n.cleanup(topic, eventsTopic)

	if err := waitHTTP(ctx, "http://"+ingestAddr+"/readyz", ingest); err != nil {
		return res, err
	}
	if err := waitAssigned(ctx, "http://"+alerterAddr+"/metrics", n.partitions, alerter); err != nil {
		return res, err
	}
	// Each partition's dispatcher starts its transactional producer on
	// assignment; let those finish so the round times the stream only.
	time.Sleep(2 * time.Second)
	n.smp.pids[n.ingestIdx] = ingest.cmd.Process.Pid
	n.smp.pids[n.alerterIdx] = alerter.cmd.Process.Pid

	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	w := &eventWatcher{addr: kafka.TCP(strings.Split(n.brokers, ",")...), topic: eventsTopic,
		partitions: n.partitions, tr: tr}

	before := n.smp.take()
	start := time.Now()
	var posted sync.WaitGroup
	errs := make([]error, len(n.bodies))
	accepted := make([]int, len(n.bodies))
	for c := range n.bodies {
		posted.Add(1)
		go func() {
			defer posted.Done()
			client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			defer client.CloseIdleConnections()
			for i, body := range n.bodies[c] {
				if err := post(ctx, client, "http://"+ingestAddr+"/v1/telemetry", body); err != nil {
					errs[c] = err
					return
				}
				accepted[c] += n.counts[c][i]
			}
		}()
	}
	postDone := make(chan struct{})
	go func() { posted.Wait(); close(postDone) }()
	done, werr := w.until(ctx, n.expected, postDone)
	posted.Wait()
	if err := errors.Join(errs...); err != nil {
		return res, fmt.Errorf("posting: %w\ningest log:\n%s", err, ingest.tailLog())
	}
	if werr != nil {
		return res, werr
	}
	res.wall = done.Sub(start)
	res.cpu = delta(before, n.smp.take())
	for _, a := range accepted {
		res.accepted += a
	}
	res.events = w.events
	return res, nil
}

// cleanup deletes the round's Redis keys and topics.
func (n *noflyRound) cleanup(topics ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: n.redis})
	defer rdb.Close()
	iter := rdb.Scan(ctx, 0, redislayout.Match(n.runID), 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	for i := 0; i < len(keys); i += 500 {
		rdb.Del(ctx, keys[i:min(i+500, len(keys))]...)
	}
	client := &kafka.Client{Addr: kafka.TCP(strings.Split(n.brokers, ",")...), Timeout: 10 * time.Second}
	_, _ = client.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: topics})
}

// eventWatcher follows alerts.events as a read_committed consumer: one
// ListOffsets of every partition's last stable offset per poll, and a read
// of what is new.
type eventWatcher struct {
	addr       net.Addr
	topic      string
	partitions int
	tr         *kafka.Transport
	events     []Event // the compared ones (NoflyEvent)
}

const pollEvery = 25 * time.Millisecond

// until polls until the topic holds want committed events and returns
// when it first saw them; once posting is over, 60 s without a new event
// ends the wait with an error naming what was seen.
func (w *eventWatcher) until(ctx context.Context, want int, posted <-chan struct{}) (time.Time, error) {
	client := &kafka.Client{Addr: w.addr, Transport: w.tr, Timeout: 10 * time.Second}
	r := &committed.Reader{Addr: w.addr, Topic: w.topic, Transport: w.tr}
	next := make([]int64, w.partitions)
	req := &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{}, IsolationLevel: kafka.ReadCommitted}
	for p := range w.partitions {
		req.Topics[w.topic] = append(req.Topics[w.topic], kafka.LastOffsetOf(p))
	}
	last := time.Now()
	for {
		if len(w.events) >= want {
			return time.Now(), nil
		}
		select {
		case <-posted:
			if time.Since(last) > time.Minute {
				return time.Time{}, fmt.Errorf("alerts.events holds %d of the reference's %d events, none new for a minute", len(w.events), want)
			}
		default:
			last = time.Now()
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(pollEvery):
		}
		res, err := client.ListOffsets(ctx, req)
		if err != nil {
			continue // the topic may not be there yet
		}
		for _, po := range res.Topics[w.topic] {
			if po.Error != nil || po.LastOffset <= next[po.Partition] {
				continue
			}
			recs, err := r.Read(ctx, po.Partition, next[po.Partition], po.LastOffset)
			if err != nil {
				return time.Time{}, err
			}
			for _, rec := range recs {
				e, ok, err := NoflyEvent(rec.Value)
				if err != nil {
					return time.Time{}, err
				}
				if ok {
					w.events = append(w.events, e)
				}
			}
			next[po.Partition] = po.LastOffset
			last = time.Now()
		}
	}
}

func post(ctx context.Context, client *http.Client, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("post telemetry: %w", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("ingest answered %s: %s", resp.Status, msg)
	}
	return nil
}

// proc is a subprocess the benchmark started; it is stopped by its pid.
type proc struct {
	cmd  *exec.Cmd
	log  string
	done chan error
}

func startProc(bin string, args []string, logPath string) (*proc, error) {
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	p := &proc{cmd: cmd, log: logPath, done: make(chan error, 1)}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() { p.done <- cmd.Wait(); lf.Close() }()
	return p, nil
}

func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *proc) tailLog() string {
	b, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-15):], "\n")
}

func (p *proc) exited() error {
	select {
	case err := <-p.done:
		p.done <- err
		return fmt.Errorf("%s exited (%v):\n%s", filepath.Base(p.cmd.Path), err, p.tailLog())
	default:
		return nil
	}
}

func waitHTTP(ctx context.Context, url string, p *proc) error {
	return waitFor(ctx, p, url, func(resp *http.Response) bool { return resp.StatusCode == http.StatusOK })
}

// waitAssigned waits until the alerter's nofly_alerter_assigned_partitions
// gauge says it processes every partition.
func waitAssigned(ctx context.Context, url string, partitions int, p *proc) error {
	want := "nofly_alerter_assigned_partitions " + strconv.Itoa(partitions)
	return waitFor(ctx, p, url, func(resp *http.Response) bool {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if sc.Text() == want {
				return true
			}
		}
		return false
	})
}

func waitFor(ctx context.Context, p *proc, url string, ok func(*http.Response) bool) error {
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if err := p.exited(); err != nil {
			return err
		}
		if resp, err := http.Get(url); err == nil {
			good := ok(resp)
			resp.Body.Close()
			if good {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s: %s not ready in 90s:\n%s", filepath.Base(p.cmd.Path), url, p.tailLog())
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "127.0.0.1:0"
	}
	defer l.Close()
	return l.Addr().String()
}
