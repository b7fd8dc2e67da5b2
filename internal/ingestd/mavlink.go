package ingestd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/feeds/mavlink"
	"github.com/nofly-dev/nofly/ingest"
	"github.com/nofly-dev/nofly/internal/httpserve"
	"github.com/nofly-dev/nofly/producer"
)

// mavlinkOpts are the flags of ingest mavlink beyond Kafka's.
type mavlinkOpts struct {
	listen   string
	fleet    string
	batch    int
	linger   time.Duration
	http     string
	shutdown time.Duration
	open     bool // --insecure-open-intake: listen beyond loopback
}

// mavlinkCmd relays GLOBAL_POSITION_INT from a MAVLink UDP stream to the
// telemetry topic through the idempotent producer, as ingest send does.
func mavlinkCmd(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	cfg := DefaultConfig()
	o := mavlinkOpts{listen: "udp://127.0.0.1:14550", batch: 500, linger: 100 * time.Millisecond, http: ":9103", shutdown: 30 * time.Second}
	fs := newFlagSet("ingest mavlink")
	fs.SetOutput(stderr)
	fs.kafkaFlags(&cfg)
	reg := func(name, env string) string { fs.Fallback(name, env); return " (env " + env + ")" }
	fs.StringVar(&o.listen, "listen", o.listen, "MAVLink UDP address to listen on, udp://host:port"+reg("listen", "NOFLY_MAVLINK_LISTEN"))
	fs.StringVar(&o.fleet, "fleet", o.fleet, "fleet name; a vehicle's drone_id is <fleet>-<system id> (required)"+reg("fleet", "NOFLY_MAVLINK_FLEET"))
	fs.IntVar(&o.batch, "batch", o.batch, "positions per Produce call at most"+reg("batch", "NOFLY_MAVLINK_BATCH"))
	fs.DurationVar(&o.linger, "linger", o.linger, "how long a batch waits to fill after its first position"+reg("linger", "NOFLY_MAVLINK_LINGER"))
	fs.StringVar(&o.http, "http", o.http, "address of /metrics and /healthz; empty turns it off"+reg("http", "NOFLY_MAVLINK_HTTP"))
	fs.DurationVar(&o.shutdown, "shutdown-timeout", o.shutdown, "how long a SIGTERM waits for queued positions to be acknowledged"+reg("shutdown-timeout", "NOFLY_MAVLINK_SHUTDOWN_TIMEOUT"))
	fs.BoolVar(&o.open, "insecure-open-intake", o.open, "listen on a non-loopback address: MAVLink has no authentication here, so anyone who can reach the port can write positions (insecure)"+
		reg("insecure-open-intake", "NOFLY_INGEST_INSECURE_OPEN_INTAKE"))
	if err := fs.Parse(args, getenv); err != nil {
		return err
	}
	addr, err := udpAddr(o.listen)
	switch {
	case err != nil:
		return fmt.Errorf("%w: --listen (NOFLY_MAVLINK_LISTEN): %v", ErrConfig, err)
	case !o.open && !loopbackHost(addr):
		return fmt.Errorf("%w: --listen (NOFLY_MAVLINK_LISTEN): %s is not a loopback address; MAVLink frames carry no key we check, so "+
			"anyone reaching it could write positions: relay them through a local router (mavlink-router, a GCS) or set --insecure-open-intake", ErrConfig, addr)
	case o.batch < 1:
		return fmt.Errorf("%w: --batch (NOFLY_MAVLINK_BATCH) must be at least 1", ErrConfig)
	case o.linger < 0:
		return fmt.Errorf("%w: --linger (NOFLY_MAVLINK_LINGER) must not be negative", ErrConfig)
	case o.shutdown <= 0:
		return fmt.Errorf("%w: --shutdown-timeout (NOFLY_MAVLINK_SHUTDOWN_TIMEOUT) must be positive", ErrConfig)
	}
	dec, err := mavlink.NewDecoder(o.fleet)
	if err != nil {
		return fmt.Errorf("%w: --fleet (NOFLY_MAVLINK_FLEET): %v", ErrConfig, err)
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	log := newLogger(stderr, cfg.LogLevel)

	conn, err := net.ListenPacket("udp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()

	promReg := prometheus.NewRegistry()
	m := newMavMetrics(promReg)
	if o.http != "" {
		// Metrics and health only: the shared timeouts, and a cap of a few
		// connections (scrapers and probes).
		l := httpserve.DefaultLimits()
		l.HTTPMaxConns = mavlinkMaxConns
		ln, err := l.Listen(o.http, func(n int) []byte {
			return fmt.Appendf(nil, `{"error":"more than %d connections open","code":"too_many_connections"}`, n)
		}, httpserve.NewMetrics(promReg), log)
		if err != nil {
			return err
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(promReg, promhttp.HandlerOpts{Registry: promReg}))
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
		srv := httpserve.NewServer(mux, l, log)
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		log.Info("mavlink metrics", "addr", ln.Addr().String())
	}

	kc, err := cfg.Security.Load()
	if err != nil {
		return err
	}
	if err := kc.Check(ctx, cfg.Brokers); err != nil {
		return err
	}
	tr := kc.Transport("nofly-ingest-mavlink")
	defer tr.CloseIdleConnections()
	admin := &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Timeout: 10 * time.Second, Transport: tr}
	if err := ensureTopic(ctx, admin, cfg); err != nil {
		return err
	}
	p, err := producer.New(ctx, producer.Config{Brokers: cfg.Brokers, Topic: cfg.Topic, ClientID: "nofly-ingest-mavlink", Logger: log,
		TLS: kc.TLS, SASL: kc.SASL})
	if err != nil {
		return err
	}
	promReg.MustRegister(ingest.NewStatsCollector(p.Stats))
	// SIGHUP reloads what `ingest serve` and the alerter read from files;
	// the relay has nothing to read again, and the signal's default would
	// end it with positions still in its batch (an operator's
	// `pkill -HUP ingest` reaches every ingest process).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				log.Info("SIGHUP: ingest mavlink has nothing to reload; it goes on relaying")
			}
		}
	}()
	log.Info("mavlink listening", "listen", conn.LocalAddr().String(), "fleet", o.fleet, "brokers", cfg.Brokers, "topic", cfg.Topic)
	if !loopbackHost(addr) {
		log.Warn("mavlink intake open to the network: anyone who reaches the port can write positions (--insecure-open-intake)", "listen", addr)
	}
	// The relay writes the clock's ticks too (ticker.go): an installation
	// whose only intake is MAVLink still has a clock in every partition.
	tctx, stopTicks := context.WithCancel(ctx)
	ticks := newTicker(p, cfg.Partitions, DefaultTickInterval, promReg, log)
	tickDone := make(chan struct{})
	go func() { defer close(tickDone); ticks.run(tctx) }()
	r := &mavRelay{conn: conn, dec: dec, p: p, log: log, m: m, batch: o.batch, linger: o.linger, shutdown: o.shutdown,
		beforeClose: func() { stopTicks(); <-tickDone }}
	err = r.run(ctx)
	stopTicks()
	st := p.Stats()
	log.Info("mavlink stopped", "records", st.Records, "batches", st.Batches, "retries", st.Retries, "duplicates", st.Duplicates)
	return err
}

// udpAddr reads udp://host:port.
func udpAddr(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "udp" || u.Host == "" || u.Path != "" || u.Port() == "" {
		return "", fmt.Errorf("%q is not udp://host:port", s)
	}
	return u.Host, nil
}

// loopbackHost reports whether host:port names a loopback address.
func loopbackHost(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

type mavMetrics struct {
	datagrams, badBytes, produceErrors prometheus.Counter
	systems                            prometheus.Counter
	positions                          *prometheus.CounterVec
	fieldsDropped                      *prometheus.CounterVec
	vehicles                           prometheus.Gauge
}

func newMavMetrics(reg prometheus.Registerer) *mavMetrics {
	m := &mavMetrics{
		datagrams: prometheus.NewCounter(prometheus.CounterOpts{Name: "nofly_mavlink_datagrams_total", Help: "UDP datagrams read."}),
		badBytes:  prometheus.NewCounter(prometheus.CounterOpts{Name: "nofly_mavlink_bad_bytes_total", Help: "Bytes that were no good MAVLink frame (noise, bad checksum, truncated)."}),
		produceErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "nofly_mavlink_produce_errors_total",
			Help: "Produce calls that failed (the batch is retried)."}),
		positions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nofly_mavlink_positions_total",
			Help: "GLOBAL_POSITION_INT messages by result: produced (acknowledged by Kafka), invalid (no GNSS fix, out of range), queue_full (dropped while Kafka lagged)."}, []string{"result"}),
		vehicles: prometheus.NewGauge(prometheus.GaugeOpts{Name: "nofly_mavlink_vehicles", Help: "Vehicles (MAVLink system ids) heard since start."}),
		systems: prometheus.NewCounter(prometheus.CounterOpts{Name: "nofly_mavlink_system_messages_total",
			Help: "OPEN_DRONE_ID_SYSTEM and OPEN_DRONE_ID_SYSTEM_UPDATE messages read: the pilot's position, attached to the vehicle's next positions."}),
		fieldsDropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nofly_ingest_fields_dropped_total",
			Help: "Optional fields dropped from positions, their value being outside its physical range (the record says so in dropped), by field."}, []string{"field"}),
	}
	reg.MustRegister(m.datagrams, m.badBytes, m.produceErrors, m.positions, m.vehicles, m.fieldsDropped, m.systems)
	for _, f := range []string{"alt_m", "speed_mps"} {
		m.fieldsDropped.WithLabelValues(f)
	}
	for _, r := range []string{"produced", "invalid", "queue_full"} {
		m.positions.WithLabelValues(r)
	}
	return m
}

// mavlinkMaxConns caps the connections to ingest mavlink's --http (its
// metrics and health): scrapers and probes, a few at a time.
const mavlinkMaxConns = 64

// queueBatches is the read queue's capacity in batches.
const queueBatches = 64

// mavProducer is what the relay needs of *producer.Producer.
type mavProducer interface {
	Produce(ctx context.Context, recs []producer.Record) error
	Close(ctx context.Context) error
}

// mavRelay reads datagrams in one goroutine and produces batches in
// another, so a slow acknowledgement does not stop the socket being read.
type mavRelay struct {
	conn     net.PacketConn
	dec      *mavlink.Decoder
	p        mavProducer
	log      *slog.Logger
	m        *mavMetrics
	batch    int
	linger   time.Duration
	shutdown time.Duration
	// beforeClose, when set, runs before the producer is closed (the
	// ticks stop first).
	beforeClose func()
}

// run relays until ctx ends, then produces what was queued (within the
// shutdown timeout) and closes the producer.
func (r *mavRelay) run(ctx context.Context) error {
	// Room for about a minute of a busy fleet (500 positions/s) while Kafka
	// is away: 64 batches of the default 500 (~250 bytes a position).
	queue := make(chan producer.Record, queueBatches*r.batch)
	readErr := make(chan error, 1)
	go func() {
		readErr <- r.read(queue)
		close(queue)
	}()
	go func() {
		<-ctx.Done()
		_ = r.conn.Close() // unblocks ReadFrom
	}()
	// Produce calls outlive ctx by up to the shutdown timeout, so what was
	// read before SIGTERM is still acknowledged.
	pctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-ctx.Done()
		t := time.NewTimer(r.shutdown)
		defer t.Stop()
		select {
		case <-t.C:
			r.log.Warn("shutdown timeout: dropping the positions not yet acknowledged", "timeout", r.shutdown)
			cancel()
		case <-pctx.Done():
		}
	}()
	prodErr := r.produce(pctx, queue)
	err := <-readErr
	if r.beforeClose != nil {
		r.beforeClose()
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	if cerr := r.p.Close(cctx); cerr != nil {
		r.log.Warn("producer close", "error", cerr)
	}
	if ctx.Err() != nil && errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return errors.Join(err, prodErr)
}

// read decodes datagrams until the socket is closed.
func (r *mavRelay) read(queue chan<- producer.Record) error {
	buf := make([]byte, 65536)
	var lastFull time.Time
	vehicles := 0
	for {
		n, from, err := r.conn.ReadFrom(buf)
		if err != nil {
			return err
		}
		recv := time.Now()
		r.m.datagrams.Inc()
		ps, st, errs := r.dec.Datagram(buf[:n], recv, nil)
		r.m.badBytes.Add(float64(st.BadBytes))
		r.m.systems.Add(float64(st.Systems))
		r.m.positions.WithLabelValues("invalid").Add(float64(st.Invalid))
		for _, w := range st.Dropped {
			r.m.fieldsDropped.WithLabelValues(w.Field).Inc()
			r.log.Debug("mavlink field dropped", "from", from.String(), "field", w.Field, "warning", w.Warning)
		}
		for _, e := range errs {
			r.log.Debug("mavlink position not used", "from", from.String(), "error", e)
		}
		if v := r.dec.Vehicles(); v != vehicles {
			vehicles = v
			r.m.vehicles.Set(float64(v))
			r.log.Info("mavlink vehicle heard", "from", from.String(), "vehicles", v)
		}
		for i := range ps {
			rec := producer.NewRecord(ps[i].Key(), ps[i].AppendJSON(nil))
			rec.Time = recv
			select {
			case queue <- rec:
			default:
				r.m.positions.WithLabelValues("queue_full").Inc()
				if time.Since(lastFull) > 10*time.Second {
					lastFull = time.Now()
					r.log.Warn("mavlink queue full: positions dropped while Kafka lags", "queue", cap(queue))
				}
			}
		}
	}
}

// produce sends batches of at most r.batch records, each after at most
// r.linger, retrying a failed batch until it is acknowledged or ctx ends.
func (r *mavRelay) produce(ctx context.Context, queue <-chan producer.Record) error {
	batch := make([]producer.Record, 0, r.batch)
	for {
		rec, ok := <-queue
		if !ok {
			return nil
		}
		batch = append(batch[:0], rec)
		timer := time.NewTimer(r.linger)
	fill:
		for len(batch) < r.batch {
			select {
			case rec, ok := <-queue:
				if !ok {
					break fill
				}
				batch = append(batch, rec)
			case <-timer.C:
				break fill
			}
		}
		timer.Stop()
		if err := r.send(ctx, batch); err != nil {
			return err
		}
	}
}

func (r *mavRelay) send(ctx context.Context, batch []producer.Record) error {
	for attempt := 0; ; attempt++ {
		err := r.p.Produce(ctx, batch)
		if err == nil {
			r.m.positions.WithLabelValues("produced").Add(float64(len(batch)))
			return nil
		}
		r.m.produceErrors.Inc()
		if ctx.Err() != nil {
			return fmt.Errorf("%d positions not acknowledged at shutdown: %w", len(batch), err)
		}
		wait := min(time.Duration(1<<min(attempt, 4))*500*time.Millisecond, 10*time.Second)
		r.log.Warn("mavlink produce failed; retrying the batch", "positions", len(batch), "attempt", attempt+1, "in", wait, "error", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d positions not acknowledged at shutdown: %w", len(batch), err)
		case <-time.After(wait):
		}
	}
}
