// Package hostiletest is the hostile client of issue 26, for the tests of
// every nofly server (the TestHostile... tests of internal/httpserve,
// internal/alerterd and internal/ingestd): bodies that never finish,
// headers that never end, connections held open, made-up methods. Each
// attack opens real TCP connections to a real listener, and each check
// waits for a condition with a deadline.
package hostiletest

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Slack is what a test allows past a server's timeout for the server to
// close a connection: what a loaded 2-core machine running the race
// detector may add. Without the timeouts the connections stay open for
// ever, so a bound of timeout + Slack still fails a server without them;
// the tests log the times measured.
const Slack = 10 * time.Second

// Conns are the connections of an attack, each watched from the moment
// it was opened: a reader notes when the server closed it and what it
// answered first.
type Conns struct {
	Start time.Time // when the first connection was opened
	cs    []net.Conn
	ends  []chan end
}

// end is how a watched connection ended.
type end struct {
	at    time.Time
	first string // the answer's first line; "" for none
}

// Close closes every connection.
func (cs *Conns) Close() {
	for _, c := range cs.cs {
		_ = c.Close()
	}
}

// CloseFirst closes the first n connections.
func (cs *Conns) CloseFirst(n int) {
	for _, c := range cs.cs[:n] {
		_ = c.Close()
	}
}

// Len is the number of connections.
func (cs *Conns) Len() int { return len(cs.cs) }

func dial(t testing.TB, addr string, n int) *Conns {
	t.Helper()
	cs := &Conns{Start: time.Now(), cs: make([]net.Conn, 0, n)}
	t.Cleanup(cs.Close)
	for range n {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			cs.Close()
			t.Fatalf("dial %s after %d connections: %v", addr, len(cs.cs), err)
		}
		cs.cs = append(cs.cs, c)
	}
	return cs
}

// watch starts a reader on every connection: it ends when the server
// closes (or resets) it.
func (cs *Conns) watch() {
	cs.ends = make([]chan end, len(cs.cs))
	for i, c := range cs.cs {
		ch := make(chan end, 1)
		cs.ends[i] = ch
		go func() {
			b, _ := io.ReadAll(io.LimitReader(c, 1<<20))
			line, _, _ := strings.Cut(string(b), "\r\n")
			ch <- end{at: time.Now(), first: line}
		}()
	}
}

// SlowBodies opens n connections that each send a whole request head —
// method, path, the headers hdr ("Name: value" lines) and a Content-Length
// of size — and then the first byte of the body only, as a client whose
// body never finishes.
func SlowBodies(t testing.TB, addr, method, path string, size int, hdr ...string) *Conns {
	t.Helper()
	return slowBodies(t, addr, method, path, size, 500, hdr)
}

// SlowBodiesN is SlowBodies with n connections.
func SlowBodiesN(t testing.TB, n int, addr, method, path string, size int, hdr ...string) *Conns {
	t.Helper()
	return slowBodies(t, addr, method, path, size, n, hdr)
}

func slowBodies(t testing.TB, addr, method, path string, size, n int, hdr []string) *Conns {
	t.Helper()
	head := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", method, path, addr, size)
	for _, h := range hdr {
		head += h + "\r\n"
	}
	head += "\r\n{"
	cs := dial(t, addr, n)
	for i, c := range cs.cs {
		if _, err := io.WriteString(c, head); err != nil {
			t.Fatalf("slow body %d: write the head: %v", i, err)
		}
	}
	cs.watch()
	return cs
}

// Slowloris opens n connections that each send the start of a request's
// headers and never the blank line that ends them.
func Slowloris(t testing.TB, addr string, n int) *Conns {
	t.Helper()
	cs := dial(t, addr, n)
	for i, c := range cs.cs {
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: "+addr+"\r\nX-Slow: a"); err != nil {
			t.Fatalf("slowloris %d: %v", i, err)
		}
	}
	cs.watch()
	return cs
}

// Trickle writes one more byte to every connection still open (a body or
// header that keeps arriving, too slowly), and reports how many took it.
func (cs *Conns) Trickle() int {
	n := 0
	for _, c := range cs.cs {
		_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		if _, err := c.Write([]byte("a")); err == nil {
			n++
		}
	}
	return n
}

// Closed waits until the server has closed every connection (a read
// returned EOF or a reset, after whatever answer the server wrote) and
// returns how long the last one took from Start, with the answers' first
// lines ("HTTP/1.1 400 Bad Request"; "" for none) counted; it fails the
// test when one was still open at Start + within.
func (cs *Conns) Closed(t testing.TB, within time.Duration) (time.Duration, map[string]int) {
	t.Helper()
	if cs.ends == nil {
		cs.watch()
	}
	deadline := time.NewTimer(time.Until(cs.Start.Add(within)) + 100*time.Millisecond)
	defer deadline.Stop()
	var last time.Duration
	status := map[string]int{}
	late := 0
	for i, ch := range cs.ends {
		select {
		case e := <-ch:
			ch <- e
			if d := e.at.Sub(cs.Start); d > last {
				last = d
			}
			if e.at.Sub(cs.Start) > within {
				late++
			}
			status[e.first]++
		case <-deadline.C:
			t.Fatalf("connection #%d of %d still open %v after the attack started", i, len(cs.ends), within)
		}
	}
	if late > 0 {
		t.Fatalf("%d of %d connections closed later than %v after the attack started (the last after %v)", late, len(cs.ends), within, last)
	}
	return last, status
}

// Refused dials addr and reads what the server answers a request on the
// connection: its status and JSON body, as a client over the connection
// cap sees them.
func Refused(t testing.TB, addr, path string) (*http.Response, []byte) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: "+addr+"\r\n\r\n"); err != nil {
		// The server may have written and closed first; the answer is
		// still there to read.
		t.Logf("write the request: %v", err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read the answer: %v", err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("read the answer's body: %v", err)
	}
	return res, b
}

// Hold opens n connections that send nothing: each takes a slot of the
// server's cap until closed (or the server's header timeout).
func Hold(t testing.TB, addr string, n int) *Conns {
	t.Helper()
	return dial(t, addr, n)
}

// MadeUpMethods sends n requests to url, each with a method no one uses
// (random letters), over one kept-alive client, and returns how many got
// an answer.
func MadeUpMethods(t testing.TB, url string, n int) int {
	t.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: 4}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	answered := 0
	var b [6]byte
	for range n {
		_, _ = rand.Read(b[:])
		method := "X" + strings.ToUpper(hex.EncodeToString(b[:]))
		req, err := http.NewRequest(method, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, url, err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		answered++
	}
	return answered
}

// Series counts the sample lines of the Prometheus metrics at url (the
// text format, comments left out) whose name starts with prefix.
func Series(t testing.TB, url, prefix string) int {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	n := 0
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, prefix) {
			n++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read %s: %v", url, err)
	}
	return n
}
