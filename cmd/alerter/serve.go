package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/geofence"
)

func serveCmd(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	cfg, err := parseConfig(args, getenv)
	if err != nil {
		return err
	}
	return serve(ctx, cfg, newLogger(stderr, cfg.LogLevel), nil)
}

// serve runs the live alerter until ctx ends. started, if not nil, is
// called with the metrics address once everything is up (tests).
func serve(ctx context.Context, cfg Config, log *slog.Logger, started func(metricsAddr string)) error {
	ix, err := loadZones(cfg.Zones)
	if err != nil {
		return err
	}
	var zones geofence.Current
	zones.Store(ix)
	log.Info("zones loaded", "file", cfg.Zones, "version", ix.Version(), "zones", len(ix.Zones()))

	rc := newRedisClient(cfg.RedisAddr, "nofly-alerter:"+cfg.Group)
	defer rc.Close()
	if err := rc.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis %s: %w", cfg.RedisAddr, err)
	}
	store, err := dedup.NewRedis(rc, dedup.RedisOptions{Prefix: cfg.RedisPrefix, Topic: cfg.Topic, EventTTL: cfg.EventTTL})
	if err != nil {
		return err
	}
	if err := ensureTopic(ctx, cfg); err != nil {
		return err
	}
	m := newMetrics()
	a := NewAlerter(cfg, store, &zones, m, log)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	addr := ""
	if cfg.HTTPAddr != "" {
		na, err := serveHTTP(ctx, cfg.HTTPAddr, m, func() error {
			if !a.joined.Load() {
				return errors.New("not in the consumer group yet")
			}
			return rc.Ping(ctx).Err()
		}, log)
		if err != nil {
			return fmt.Errorf("listen %s: %w", cfg.HTTPAddr, err)
		}
		addr = na.String()
		log.Info("metrics", "addr", addr)
	}

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				reloadZones(cfg.Zones, &zones, m, log)
			}
		}
	}()
	if started != nil {
		started(addr)
	}
	return a.Run(ctx)
}

// reloadZones swaps in the zone file's current content; a bad file keeps
// the zones in use. Alarms of removed or changed zones clear at their
// drone's next position.
func reloadZones(path string, zones *geofence.Current, m *metrics, log *slog.Logger) {
	ix, err := loadZones(path)
	if err != nil {
		m.reloads.WithLabelValues("error").Inc()
		log.Error("zone reload failed; keeping the zones in use", "err", err)
		return
	}
	old := zones.Store(ix)
	ch := geofence.Diff(old, ix)
	m.reloads.WithLabelValues("ok").Inc()
	log.Info("zones reloaded", "version", ix.Version(), "added", ch.Added, "removed", ch.Removed, "changed", ch.Changed)
}
