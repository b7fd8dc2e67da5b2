package alerterd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/audit"
	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/geofence/zonestore"
	"github.com/nofly-dev/nofly/internal/gchold"
)

// zonePoll is how often an alerter reads the zone store's version: a
// change made anywhere (the API of any instance, a SIGHUP) is in use on
// every instance within about this long, one GET a second per instance.
var zonePoll = time.Second // a variable for the tests

// zoneValidator checks zone sets with the alerter's zone options: the
// store, the API and SIGHUP agree on what loads.
func (c Config) zoneValidator() zonestore.Validator {
	return zonestore.Validator{Loader: geofence.Loader{Strict: c.StrictZones, Conservative: c.ConservativeZones}, AllowEmpty: c.AllowEmptyZones}
}

// zoneStore is the alerter's zone store under its Redis prefix; history is
// kept for the alarm retention (at least the last 32 versions), at most
// --zone-history-max-bytes of it.
func (c Config) zoneStore(rc redis.UniversalClient) *zonestore.Store {
	return zonestore.New(rc, zonestore.Options{Prefix: c.RedisPrefix, Retention: c.zoneRetention(), MaxBytes: c.ZoneHistoryMaxBytes,
		Replicas: c.replicas()})
}

// zoneRetention is how long zone versions are kept: the alarm retention,
// the longest a replay of the alarms' telemetry needs them.
func (c Config) zoneRetention() time.Duration { return c.AlarmRetention }

// zoneSync keeps the zones in use on the zone store's current version.
type zoneSync struct {
	store *zonestore.Store
	v     zonestore.Validator
	src   zoneSource // the --zones file: the seed, and what SIGHUP reads
	zones *geofence.Current
	m     *metrics
	log   *slog.Logger
	host  string
	// auditRetention is --audit-retention: a stored file's audit entry
	// trims its stream by it.
	auditRetention time.Duration

	// applyMu makes applies one at a time (two builds of a national set
	// at once would hold both in memory); mu guards inUse and refused and
	// is never held across a build, so the version gauge and the poll
	// never wait seconds for one.
	applyMu sync.Mutex
	mu      sync.Mutex
	inUse   int64 // the version in use, 0 before the first
	refused int64 // the last version that did not load here, not retried
}

// startZoneSync seeds the store from the zone file when it holds no set
// (version 1), swaps in the store's current version, and follows the store
// until ctx ends.
func startZoneSync(ctx context.Context, cfg Config, rc redis.UniversalClient, zones *geofence.Current, m *metrics, log *slog.Logger) (*zoneSync, error) {
	host, _ := os.Hostname()
	zs := &zoneSync{store: cfg.zoneStore(rc), v: cfg.zoneValidator(), src: cfg.zoneSource(), zones: zones, m: m,
		log: log, host: host, auditRetention: cfg.AuditRetention}
	// Redis may be unreachable or drop connections for a while (the client
	// does not retry): the store is tried again, with backoff, until ctx
	// ends; a zone file or stored set that does not load is final.
	wait := 100 * time.Millisecond
	for {
		err := zs.first(ctx)
		var fe *zoneFileError
		if err == nil {
			break
		} else if errors.As(err, &fe) || ctx.Err() != nil {
			return nil, err
		}
		log.Warn("zone store unreachable at start; trying again", "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("zone store: %w (last error: %w)", ctx.Err(), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
	// The version in use, to see every instance on the same one.
	_ = m.reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "nofly", Subsystem: "alerter", Name: "zone_version",
		Help: "The zone store's version of the zones in use."}, func() float64 { return float64(zs.version()) }))
	go zs.follow(ctx)
	return zs, nil
}

// zoneFileError is a zone file or stored zone set that does not load:
// trying again would not help.
type zoneFileError struct{ err error }

func (e *zoneFileError) Error() string { return e.err.Error() }
func (e *zoneFileError) Unwrap() error { return e.err }

// first seeds an empty store from the zone file and swaps in the store's
// current version.
func (zs *zoneSync) first(ctx context.Context) error {
	cur, err := zs.store.Current(ctx)
	if errors.Is(err, zonestore.ErrEmpty) {
		if _, err := zs.putFile(ctx, "seed:"+zs.host, true); err != nil {
			return fmt.Errorf("seed the zone store from %s: %w", zs.src.path, err)
		}
		cur, err = zs.store.Current(ctx)
	}
	if err != nil {
		return err
	}
	if err := zs.apply(cur, false); err != nil {
		return &zoneFileError{fmt.Errorf("zone store version %d: %w", cur.Version, err)}
	}
	return nil
}

// follow polls the store's version and applies a new one.
func (zs *zoneSync) follow(ctx context.Context) {
	t := time.NewTicker(zonePoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := zs.poll(ctx); err != nil && ctx.Err() == nil {
			zs.log.Warn("zone store poll failed; keeping the zones in use", "err", err, "version", zs.version())
		}
	}
}

func (zs *zoneSync) version() int64 {
	zs.mu.Lock()
	defer zs.mu.Unlock()
	return zs.inUse
}

func (zs *zoneSync) poll(ctx context.Context) error {
	v, err := zs.store.Version(ctx)
	if err != nil {
		return err
	}
	zs.mu.Lock()
	same := v == zs.inUse || v == zs.refused
	zs.mu.Unlock()
	if same {
		return nil
	}
	cur, err := zs.store.Current(ctx)
	if err != nil {
		return err
	}
	// A version below the one in use: the store was emptied and seeded
	// again (a reset), so its version is the truth again.
	back := cur.Version < zs.version()
	if back {
		zs.log.Warn("the zone store's version went back (store reset?); following it", "version", cur.Version, "in_use", zs.version())
	}
	if err := zs.apply(cur, back); err != nil {
		zs.log.Error("zone store version does not load here; keeping the zones in use", "err", err,
			"version", cur.Version, "in_use", zs.version())
	}
	return nil
}

// apply swaps in a stored version, unless it is the one in use or older
// (a SIGHUP's version applied after a poll applied a later one), or back.
// The index is built here, in the zone sync's goroutine, while every
// partition goes on applying records with the index in use; the swap is
// one atomic pointer store, which each batch picks up at its start (a
// 100,000-zone set takes seconds to build and no batch waits for it:
// BENCHMARKS.md, "National zone sets").
func (zs *zoneSync) apply(e zonestore.Entry, back bool) error {
	zs.applyMu.Lock()
	defer zs.applyMu.Unlock()
	zs.mu.Lock()
	skip := e.Version == zs.inUse || (e.Version < zs.inUse && !back)
	zs.mu.Unlock()
	if skip {
		return nil
	}
	began := time.Now()
	// The collector held off while the set parses and builds: its assists
	// would otherwise stall every partition's batches (gchold).
	var ix *geofence.Index
	var rep geofence.LoadReport
	var err error
	gchold.Do(gchold.Budget(len(e.Zones)), func() { ix, rep, err = zs.v.Index(e) })
	if err != nil {
		zs.mu.Lock()
		zs.refused = e.Version
		zs.mu.Unlock()
		zs.m.reloads.WithLabelValues("error").Inc()
		return err
	}
	built := time.Since(began)
	logZoneReport(zs.log, "zone store version loaded", rep, ix.Version())
	old := zs.zones.Store(ix)
	zs.mu.Lock()
	zs.inUse = e.Version
	zs.mu.Unlock()
	ch := geofence.Diff(old, ix)
	zs.m.reloads.WithLabelValues("ok").Inc()
	zs.log.Info("zones switched", "zone_version", e.Version, "by", e.By, "at", e.At, "version", ix.Version(),
		"zones", len(ix.Zones()), "built_in", built.Round(time.Millisecond),
		"added", len(ch.Added), "removed", len(ch.Removed), "changed", len(ch.Changed))
	return nil
}

// putFile stores the zone file's content as the next version: the seed
// (only into an empty store) or a SIGHUP (over whatever is current; a file
// equal to the current set makes no version).
func (zs *zoneSync) putFile(ctx context.Context, by string, seed bool) (zonestore.Entry, error) {
	// The file's own load first: its errors and report name the file.
	ix, rep, err := zs.src.load()
	if err != nil {
		return zonestore.Entry{}, &zoneFileError{err}
	}
	logZoneReport(zs.log, "zone file read", rep, ix.Version())
	b, err := os.ReadFile(zs.src.path)
	if err != nil {
		return zonestore.Entry{}, &zoneFileError{err}
	}
	format, doc, _, err := zs.v.Normalize(b)
	if err != nil {
		return zonestore.Entry{}, &zoneFileError{fmt.Errorf("%s: %w", zs.src.path, err)}
	}
	for try := 0; ; try++ {
		cur, err := zs.store.Current(ctx)
		switch {
		case errors.Is(err, zonestore.ErrEmpty):
		case err != nil:
			return zonestore.Entry{}, err
		case seed:
			return cur, nil // another instance seeded it first
		case bytes.Equal(cur.Zones, doc):
			zs.log.Info("zone file equals the zone store's current set: no new version", "zone_version", cur.Version)
			return cur, nil
		}
		// The audit entry of the seed or the SIGHUP, written with the version.
		actx := audit.WithChange(ctx, audit.Entry{Who: by, Via: audit.ViaSystem, Action: audit.ActionZonesPut,
			Request: "zone file " + zs.src.path, Outcome: audit.OutcomeOK}, zs.auditRetention, nil)
		e, err := zs.store.Put(actx, cur.Version, string(format), doc, by)
		var ce *zonestore.ConflictError
		if errors.As(err, &ce) && try < 10 {
			continue
		}
		if err == nil {
			zs.log.Info("zone file stored", "zone_version", e.Version, "by", by, "file", zs.src.path)
		}
		return e, err
	}
}

// reload is SIGHUP: the zone file becomes the store's next version, in use
// here at once and on every instance within zonePoll. A bad file keeps the
// zones in use.
func (zs *zoneSync) reload(ctx context.Context) {
	e, err := zs.putFile(ctx, "sighup:"+zs.host, false)
	if err != nil {
		zs.m.reloads.WithLabelValues("error").Inc()
		zs.log.Error("zone reload failed; keeping the zones in use", "err", err, "zone_version", zs.version(),
			"zones_in_use", len(zs.zones.Load().Zones()))
		return
	}
	if err := zs.apply(e, false); err != nil {
		zs.log.Error("zone store version does not load here; keeping the zones in use", "err", err, "version", e.Version)
	}
}
