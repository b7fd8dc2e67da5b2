package embedded

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
)

// shim completes miniredis where the pipeline relies on Redis and
// miniredis falls short, from a pre-command hook (which sees every
// command, those of Lua scripts included):
//
//   - CLIENT SETINFO (go-redis names its connections with it) answers OK;
//   - XINFO STREAM answers every field Redis 7 does. miniredis gives only
//     length and last-generated-id, and the alert API reads first-entry,
//     entries-added and max-deleted-entry-id to tell a trimmed history (a
//     410) from a complete one. entries-added is counted here from the
//     XADDs seen (an XADD that fails still counts: the error is on the
//     side of "trimmed", a 410 rather than a silent gap), max-deleted-
//     entry-id from the XDELs seen; DEL, UNLINK and the FLUSHes reset them.
//     The hook runs each XADD itself, counted as in flight until it is
//     applied, and XINFO STREAM reads the stream only when no XADD of it
//     was in flight or counted meanwhile: counted before it was applied,
//     an XADD made entries-added run ahead of the length, which the API
//     took for a trim (a live stream ended with a 410).
//
// The hook answers XINFO STREAM itself, so it must not be sent inside
// MULTI or from a Lua script (the pipeline does neither).
type shim struct {
	m        *miniredis.Miniredis
	mu       sync.Mutex
	added    map[string]int64
	inflight map[string]int
	maxDl    map[string]string
	inner    sync.Map // *server.Peer of the shim's own calls: not hooked
}

func newShim(m *miniredis.Miniredis) *shim {
	return &shim{m: m, added: map[string]int64{}, inflight: map[string]int{}, maxDl: map[string]string{}}
}

// xadd counts an XADD of key and runs it (from a Lua script too: there
// miniredis holds its lock already, and the command runs nested in it).
func (s *shim) xadd(c *server.Peer, args []string) {
	key := args[0]
	s.mu.Lock()
	s.added[key]++
	s.inflight[key]++
	s.mu.Unlock()
	s.inner.Store(c, struct{}{})
	s.m.Server().Dispatch(c, append([]string{"XADD"}, args...))
	s.inner.Delete(c)
	s.mu.Lock()
	s.inflight[key]--
	s.mu.Unlock()
}

// settled reads key's XADD count while none is in flight.
func (s *shim) settled(key string) (added int64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.added[key], s.inflight[key] == 0
}

func (s *shim) hook(c *server.Peer, cmd string, args ...string) bool {
	if _, ok := s.inner.Load(c); ok {
		return false
	}
	switch cmd {
	case "CLIENT":
		if len(args) > 0 && strings.EqualFold(args[0], "SETINFO") {
			c.WriteOK()
			return true
		}
	case "XADD":
		if len(args) > 0 {
			s.xadd(c, args)
			return true
		}
	case "XDEL":
		if len(args) > 1 {
			s.mu.Lock()
			for _, id := range args[1:] {
				if cur, ok := s.maxDl[args[0]]; !ok || idLess(cur, id) {
					s.maxDl[args[0]] = id
				}
			}
			s.mu.Unlock()
		}
	case "DEL", "UNLINK":
		s.mu.Lock()
		for _, k := range args {
			delete(s.added, k)
			delete(s.maxDl, k)
		}
		s.mu.Unlock()
	case "FLUSHALL", "FLUSHDB":
		s.mu.Lock()
		clear(s.added)
		clear(s.maxDl)
		s.mu.Unlock()
	case "XINFO":
		if len(args) == 2 && strings.EqualFold(args[0], "STREAM") {
			s.xinfoStream(c, args[1])
			return true
		}
	}
	return false
}

// xinfoStream answers XINFO STREAM key: the entries first, then
// miniredis's own answer (its last-generated-id, and its error for a
// missing key or a wrong type), so that last-generated-id is never older
// than the last entry reported.
func (s *shim) xinfoStream(c *server.Peer, key string) {
	var (
		entries []miniredis.StreamEntry
		reply   interface{}
		added   int64
	)
	// The stream and the count as of one moment: read again while an XADD
	// of it was in flight or counted in between (for 1 s at most; then the
	// last read, whose count can only be ahead: "trimmed", never a gap).
	for start := time.Now(); ; time.Sleep(100 * time.Microsecond) {
		before, settled := s.settled(key)
		var err error
		if entries, err = s.m.Stream(key); err != nil {
			c.WriteError(err.Error())
			return
		}
		var buf bytes.Buffer
		w := bufio.NewWriter(&buf)
		p := server.NewPeer(w)
		s.inner.Store(p, struct{}{})
		s.m.Server().Dispatch(p, []string{"XINFO", "STREAM", key})
		s.inner.Delete(p)
		_ = w.Flush()
		if reply, err = server.ParseReply(bufio.NewReader(&buf)); err != nil {
			c.WriteError(err.Error())
			return
		}
		after, settledAfter := s.settled(key)
		added = after
		if (settled && settledAfter && before == after) || time.Since(start) > time.Second {
			break
		}
	}
	fields, _ := reply.([]interface{})
	lastGen := ""
	for i := 0; i+1 < len(fields); i += 2 {
		if k, _ := fields[i].(string); k == "last-generated-id" {
			lastGen, _ = fields[i+1].(string)
		}
	}
	if lastGen == "" {
		c.WriteError(fmt.Sprintf("ERR embedded XINFO STREAM %s: no last-generated-id in %v", key, reply))
		return
	}
	added = max(added, int64(len(entries)))
	s.mu.Lock()
	maxDel, ok := s.maxDl[key]
	s.mu.Unlock()
	if !ok {
		maxDel = "0-0"
	}
	first := "0-0"
	if len(entries) > 0 {
		first = entries[0].ID
	}
	c.Block(func(w *server.Writer) {
		w.WriteMapLen(10)
		w.WriteBulk("length")
		w.WriteInt(len(entries))
		w.WriteBulk("radix-tree-keys")
		w.WriteInt(1)
		w.WriteBulk("radix-tree-nodes")
		w.WriteInt(2)
		w.WriteBulk("last-generated-id")
		w.WriteBulk(lastGen)
		w.WriteBulk("max-deleted-entry-id")
		w.WriteBulk(maxDel)
		w.WriteBulk("entries-added")
		w.WriteInt(int(added))
		w.WriteBulk("recorded-first-entry-id")
		w.WriteBulk(first)
		w.WriteBulk("groups")
		w.WriteInt(0)
		for _, name := range []string{"first-entry", "last-entry"} {
			w.WriteBulk(name)
			if len(entries) == 0 {
				w.WriteNull()
				continue
			}
			e := entries[0]
			if name == "last-entry" {
				e = entries[len(entries)-1]
			}
			w.WriteLen(2)
			w.WriteBulk(e.ID)
			w.WriteLen(len(e.Values))
			for _, v := range e.Values {
				w.WriteBulk(v)
			}
		}
	})
}

// idLess compares stream ids "ms-seq" numerically; an id that does not
// parse sorts first.
func idLess(a, b string) bool {
	am, as := splitID(a)
	bm, bs := splitID(b)
	if am != bm {
		return am < bm
	}
	return as < bs
}

func splitID(id string) (ms, seq uint64) {
	l, r, _ := strings.Cut(id, "-")
	ms, _ = strconv.ParseUint(l, 10, 64)
	seq, _ = strconv.ParseUint(r, 10, 64)
	return ms, seq
}
