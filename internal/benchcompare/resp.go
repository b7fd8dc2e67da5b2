package benchcompare

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// A minimal RESP client for Tile38: commands as arrays of bulk strings,
// replies parsed into strings, integers, errors and arrays. Enough for
// SET, SETCHAN, SUBSCRIBE and SERVER, with pipelining left to the caller
// (append many commands, flush once, read as many replies).

// appendCommand appends args as one RESP command.
func appendCommand(b []byte, args ...string) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	return b
}

// respError is an error reply ("-ERR ...").
type respError string

func (e respError) Error() string { return "tile38: " + string(e) }

// readReply reads one reply: a string (simple or bulk; a nil bulk is
// nil), an int64, a respError, or a []any.
func readReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("tile38: bad reply line %.40q", line)
	}
	kind, body := line[0], line[1:len(line)-2]
	switch kind {
	case '+':
		return string(body), nil
	case '-':
		return respError(body), nil
	case ':':
		n, err := strconv.ParseInt(string(body), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("tile38: bad integer reply: %w", err)
		}
		return n, nil
	case '$':
		n, err := strconv.Atoi(string(body))
		if err != nil {
			return nil, fmt.Errorf("tile38: bad bulk length: %w", err)
		}
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(string(body))
		if err != nil {
			return nil, fmt.Errorf("tile38: bad array length: %w", err)
		}
		if n < 0 {
			return nil, nil
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = readReply(r); err != nil {
				return nil, err
			}
		}
		return out, nil
	default:
		return nil, fmt.Errorf("tile38: unknown reply type %q", kind)
	}
}

// conn is one connection to Tile38.
type conn struct {
	c net.Conn
	r *bufio.Reader
}

func dial(ctx context.Context, addr string) (*conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("tile38: %w", err)
	}
	return &conn{c: c, r: bufio.NewReaderSize(c, 64<<10)}, nil
}

func (c *conn) Close() error { return c.c.Close() }

// do sends one command and returns its reply; an error reply is an error.
func (c *conn) do(args ...string) (any, error) {
	_ = c.c.SetDeadline(time.Now().Add(30 * time.Second))
	defer c.c.SetDeadline(time.Time{})
	if _, err := c.c.Write(appendCommand(nil, args...)); err != nil {
		return nil, fmt.Errorf("tile38: %s: %w", args[0], err)
	}
	v, err := readReply(c.r)
	if err != nil {
		return nil, fmt.Errorf("tile38: %s: %w", args[0], err)
	}
	if e, ok := v.(respError); ok {
		return nil, fmt.Errorf("%s: %w", args[0], e)
	}
	return v, nil
}

// pipeline writes cmds (n commands, already encoded) and reads n replies,
// failing on the first error reply.
func (c *conn) pipeline(cmds []byte, n int) error {
	if _, err := c.c.Write(cmds); err != nil {
		return fmt.Errorf("tile38: pipeline: %w", err)
	}
	for range n {
		v, err := readReply(c.r)
		if err != nil {
			return fmt.Errorf("tile38: pipeline: %w", err)
		}
		if e, ok := v.(respError); ok {
			return fmt.Errorf("pipeline: %w", e)
		}
	}
	return nil
}
