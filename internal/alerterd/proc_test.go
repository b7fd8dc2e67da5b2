package alerterd

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/nofly-dev/nofly/telemetry"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	binDir    string
)

// alerterBinary builds this command once per test run.
func alerterBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "alerter-bin-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "alerter")
		cmd := exec.Command("go", "build", "-o", binPath, "../../cmd/alerter")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	// The SSE benchmark's client process: this binary, started by
	// connectSSE, runs only the clients.
	if base := os.Getenv(sseChildURL); base != "" {
		if err := sseClientChild(base); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	// The test-only fault point (faults.go) is for the one subprocess a
	// test sets it on (startProc's env): never for this process's
	// in-process alerters, nor inherited by the other subprocesses.
	os.Unsetenv(faultStopBeforeCommitEnv)
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// proc is an alerter running as a subprocess.
type proc struct {
	t       testing.TB
	name    string
	cmd     *exec.Cmd
	http    string
	done    chan struct{}
	logPath string
}

// startProc starts `alerter serve` configured as cfg (Config.Environ: its
// variables, and flags for its empty fields, such as an empty events topic
// that turns dispatch to Kafka off), on a free HTTP port and at log level
// info (logLines reads the info lines), with extra (KEY=value) after the
// variables.
func (p *pipeline) startProc(name string, cfg Config, extra ...string) *proc {
	t := p.t
	port := testenv.FreePort(t)
	cfg.HTTPAddr = "127.0.0.1:" + strconv.Itoa(port)
	cfg.LogLevel = "info"
	vars, flags := cfg.Environ()
	env := append(append(os.Environ(), vars...), extra...)
	logPath := filepath.Join(t.TempDir(), name+".log")
	lf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(alerterBinary(t), append([]string{"serve"}, flags...)...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pr := &proc{t: t, name: name, cmd: cmd, http: cfg.HTTPAddr, done: make(chan struct{}), logPath: logPath}
	go func() { _ = cmd.Wait(); lf.Close(); close(pr.done) }()
	t.Cleanup(func() { pr.kill() })
	// Registered after the kill, so it runs before it: a failed test shows
	// each process's end of log and whether it was still running, which
	// tells a stalled alerter from one that never started.
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		st := "running"
		select {
		case <-pr.done:
			st = "exited: " + pr.cmd.ProcessState.String()
		default:
		}
		t.Logf("%s (%s, http %s), end of its log:\n%s", name, st, pr.http, pr.tailN(2000))
	})
	return pr
}

// up waits until the process's HTTP listener accepts connections (it
// listens only after the topics and the dispatchers' transactional
// producers are ready, which can take seconds after a SIGKILL left a
// transaction open) and fails the test if the process exits first.
func (pr *proc) up(timeout time.Duration) {
	pr.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-pr.done:
			pr.t.Fatalf("%s exited (%v) before listening on %s; log:\n%s", pr.name, pr.cmd.ProcessState, pr.http, pr.tail())
		default:
		}
		c, err := net.DialTimeout("tcp", pr.http, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			pr.t.Fatalf("%s not listening on %s after %v: %v; log:\n%s", pr.name, pr.http, timeout, err, pr.tail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (pr *proc) signal(s syscall.Signal) {
	select {
	case <-pr.done:
	default:
		_ = pr.cmd.Process.Signal(s)
	}
}

// kill sends SIGKILL and waits for the process to be gone. No SIGCONT
// first: SIGKILL ends a stopped process too, and a SIGCONT would let one
// stopped before a commit (faults.go) send that commit in the moment
// before the SIGKILL lands.
func (pr *proc) kill() {
	pr.signal(syscall.SIGKILL)
	<-pr.done
}

// stop sends SIGTERM and waits for a clean exit.
func (pr *proc) stop() {
	pr.signal(syscall.SIGTERM)
	select {
	case <-pr.done:
	case <-time.After(60 * time.Second):
		pr.t.Errorf("%s did not stop on SIGTERM within 60s", pr.name)
		pr.kill()
	}
	if st := pr.cmd.ProcessState; st != nil && !st.Success() {
		pr.t.Errorf("%s exited with %v; log:\n%s", pr.name, st, pr.tail())
	}
}

// state is the process's state letter from /proc/<pid>/stat (R, S, T for
// stopped, ...).
func (pr *proc) state() (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pr.cmd.Process.Pid))
	if err != nil {
		return "", err
	}
	// pid (comm) state ...: comm may hold spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || len(strings.Fields(s[i+1:])) == 0 {
		return "", fmt.Errorf("unexpected /proc stat %q", s)
	}
	return strings.Fields(s[i+1:])[0], nil
}

// waitStopped waits until the process is stopped (state T), and fails the
// test if it exits or does not stop within timeout.
func (pr *proc) waitStopped(timeout time.Duration) {
	pr.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-pr.done:
			pr.t.Fatalf("%s exited before it stopped; log:\n%s", pr.name, pr.tail())
		default:
		}
		st, err := pr.state()
		if err == nil && st == "T" {
			return
		}
		if time.Now().After(deadline) {
			pr.t.Fatalf("%s not stopped after %v (state %q, %v); log:\n%s", pr.name, timeout, st, err, pr.tail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// logLines returns the process's JSON log lines whose msg starts with
// prefix.
func (pr *proc) logLines(prefix string) []map[string]any {
	f, err := os.Open(pr.logPath)
	if err != nil {
		pr.t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l map[string]any
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue
		}
		if msg, _ := l["msg"].(string); strings.HasPrefix(msg, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// faultStop is where the test-only fault point (faults.go) stopped a
// process.
type faultStop struct {
	Partition  int
	Generation int32
	Expected   int64
}

// faultStop reads the fault point's log line of a stopped process.
func (pr *proc) faultStop() faultStop {
	pr.t.Helper()
	ls := pr.logLines("fault injection: stopping the process")
	if len(ls) != 1 {
		pr.t.Fatalf("%s: %d fault-stop log lines, want 1; log:\n%s", pr.name, len(ls), pr.tail())
	}
	part, ok1 := ls[0]["partition"].(float64)
	gen, ok2 := ls[0]["generation"].(float64)
	exp, ok3 := ls[0]["expected"].(float64)
	if !ok1 || !ok2 || !ok3 {
		pr.t.Fatalf("%s: fault-stop log line without partition, generation or expected: %v", pr.name, ls[0])
	}
	return faultStop{Partition: int(part), Generation: int32(gen), Expected: int64(exp)}
}

func (pr *proc) tail() string { return pr.tailN(4000) }

// tailN is the last n bytes of the process's log.
func (pr *proc) tailN(n int) string {
	b, _ := os.ReadFile(pr.logPath)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// metric returns a metric's value from /metrics.
func (pr *proc) metric(name string) (float64, error) {
	c := http.Client{Timeout: 2 * time.Second}
	res, err := c.Get("http://" + pr.http + "/metrics")
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == name {
			return strconv.ParseFloat(f[1], 64)
		}
	}
	return 0, fmt.Errorf("%s: no metric %s", pr.name, name)
}

// appliedTotal is the number of records applied over all partitions.
func (p *pipeline) appliedTotal() (int64, error) {
	s := p.store()
	var n int64
	for part := 0; part < p.partitions; part++ {
		snap, err := s.Load(context.Background(), part)
		if err != nil {
			return 0, err
		}
		n += snap.Applied + 1
	}
	return n, nil
}

// storeState describes every partition's version and outbox length: any
// successful commit changes it (a commit always moves the version on).
func (p *pipeline) storeState() (string, error) {
	s := p.store()
	var b strings.Builder
	for part := 0; part < p.partitions; part++ {
		snap, err := s.Load(context.Background(), part)
		if err != nil {
			return "", err
		}
		es, err := s.Outbox(context.Background(), part)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "p%d: applied %d, %d events; ", part, snap.Applied, len(es))
	}
	return b.String(), nil
}

// waitApplied polls often (a kill must land mid-stream) until at least n
// records are applied.
func (p *pipeline) waitApplied(n int64, timeout time.Duration) {
	p.t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(timeout)
	for {
		got, err := p.appliedTotal()
		if err == nil && got >= n {
			return
		}
		select {
		case <-deadline:
			p.t.Fatalf("after %v: %d records applied, want %d (err %v)", timeout, got, n, err)
		case <-tick.C:
		}
	}
}

// produceInBackground produces the records in chunks at about rate
// records/s, so that the run spans the faults the test injects. It returns
// a channel closed when all are written.
func (p *pipeline) produceInBackground(recs []telemetry.Position, times []time.Time, rate int) <-chan struct{} {
	g := p.produceGated(recs, times, rate)
	g.set(int64(len(recs)))
	return g.done
}

// gatedProducer produces at about rate records/s, never past the limit the
// test has set last: a fault schedule can hold the stream while it restarts
// a process, so the stream cannot run out before the faults do however long
// each restart takes on the machine.
type gatedProducer struct {
	limits chan int64
	done   chan struct{}
	wrote  chan struct{} // a token after each write
	n      atomic.Int64  // records written
}

// awaitWrite returns once the producer has written records after the call,
// false after timeout.
func (g *gatedProducer) awaitWrite(timeout time.Duration) bool {
	select {
	case <-g.wrote:
	default:
	}
	select {
	case <-g.wrote:
		return true
	case <-time.After(timeout):
		return false
	}
}

// set lets the producer go on up to the first n records (0 holds it).
func (g *gatedProducer) set(n int64) { g.limits <- n }

// produced is the number of records written so far.
func (g *gatedProducer) produced() int64 { return g.n.Load() }

func (p *pipeline) produceGated(recs []telemetry.Position, times []time.Time, rate int) *gatedProducer {
	g := &gatedProducer{limits: make(chan int64, 64), done: make(chan struct{}), wrote: make(chan struct{}, 1)}
	const chunk = 500 // bursts: each gives the alerter a few batches of work
	// A test that ends early (t.Fatal) stops the producer and waits for it:
	// its t.Error or t.Logf after the test's end would panic the package.
	stop := make(chan struct{})
	p.t.Cleanup(func() { close(stop); <-g.done })
	go func() {
		defer close(g.done)
		tick := time.NewTicker(time.Duration(float64(time.Second) * chunk / float64(rate)))
		defer tick.Stop()
		var limit int64
		for i := 0; i < len(recs); {
			for {
				select {
				case limit = <-g.limits:
					continue
				default:
				}
				if int64(i) < limit {
					break
				}
				select {
				case limit = <-g.limits:
				case <-stop:
					return
				case <-time.After(5 * time.Minute):
					p.t.Errorf("producer: held at record %d for 5 minutes", i)
					return
				}
			}
			end := min(i+chunk, len(recs), int(limit))
			var ts []time.Time
			if times != nil {
				ts = times[i:end]
			}
			select {
			case <-stop:
				return
			default:
			}
			if err := p.produceErrAt(recs[i:end], ts); err != nil {
				p.t.Error(err)
				return
			}
			i = end
			g.n.Store(int64(i))
			select {
			case g.wrote <- struct{}{}:
			default:
			}
			select {
			case <-tick.C:
			case <-stop:
				return
			}
		}
	}()
	return g
}

func randBetween(r *rand.Rand, lo, hi int64) int64 { return lo + r.Int64N(hi-lo+1) }

// healthz is nil when GET /healthz answers 200.
func (pr *proc) healthz() error {
	c := http.Client{Timeout: 2 * time.Second}
	res, err := c.Get("http://" + pr.http + "/healthz")
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("status %s", res.Status)
	}
	return nil
}
