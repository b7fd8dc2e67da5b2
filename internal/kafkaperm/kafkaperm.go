// Package kafkaperm checks at start that the principal a service connects
// to Kafka as may do what the service is about to do, so that a missing ACL
// stops the service with one line naming the resource, the operation and
// the principal, instead of showing up later as a consumer that never
// joins or an outbox that retries for ever.
//
// The check asks the broker, without side effects: the topics' authorized
// operations in a Metadata request (v8), the group's in DescribeGroups (v3+),
// and, for a transactional id, FindCoordinator, which needs DESCRIBE on it
// (WRITE implies DESCRIBE; an ACL of DESCRIBE alone passes here and fails
// at the first InitProducerId). A broker without an authorizer reports
// every operation as allowed.
package kafkaperm

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol/describegroups"
	"github.com/segmentio/kafka-go/protocol/metadata"
	"github.com/segmentio/kafka-go/sasl"
)

// Op is a Kafka ACL operation, numbered as in the protocol's authorized
// operations bit field (org.apache.kafka.common.acl.AclOperation).
type Op int8

const (
	Read     Op = 3
	Write    Op = 4
	Describe Op = 8
)

func (o Op) String() string {
	switch o {
	case Read:
		return "READ"
	case Write:
		return "WRITE"
	case Describe:
		return "DESCRIBE"
	}
	return fmt.Sprintf("operation %d", int8(o))
}

// unknownOps is what a broker answers for authorized operations it was not
// asked for or does not report (Integer.MIN_VALUE).
const unknownOps = int32(-2147483648)

// Need is what a service will do.
type Need struct {
	Topics           map[string][]Op // per topic, the operations used
	Groups           []string        // consumer groups joined (READ)
	TransactionalIDs []string        // transactional ids written under
}

// Denied is a missing permission.
type Denied struct {
	Principal string
	Resource  string // e.g. `topic "alerts.events"`
	Op        Op
}

func (d *Denied) Error() string {
	return fmt.Sprintf("kafka principal %s may not %s %s: grant it (docs/operations.md, Least privilege)", d.Principal, d.Op, d.Resource)
}

// Conn is how Check reaches the brokers: the service's own TLS and SASL
// settings and its transport.
type Conn struct {
	Brokers   []string
	TLS       *tls.Config    // nil: plaintext
	SASL      sasl.Mechanism // nil: none
	Transport kafka.RoundTripper
}

// Check returns a *Denied (wrapped) for the first operation of need the
// principal may not do, or the error that kept it from asking. principal
// only names the principal in the error (e.g. "User:nofly-alerter").
func Check(ctx context.Context, c Conn, principal string, need Need) error {
	addr, tr := kafka.TCP(c.Brokers...), c.Transport
	if len(need.Topics) > 0 {
		names := make([]string, 0, len(need.Topics))
		for t := range need.Topics {
			names = append(names, t)
		}
		slices.Sort(names)
		md, err := rawMetadata(ctx, c, &metadata.Request{TopicNames: names, IncludeTopicAuthorizedOperations: true})
		if err != nil {
			return fmt.Errorf("kafka permissions: metadata of topics %s: %w", strings.Join(names, ", "), err)
		}
		got := make(map[string]metadata.ResponseTopic, len(md.Topics))
		for _, t := range md.Topics {
			got[t.Name] = t
		}
		for _, name := range names {
			t, ok := got[name]
			res := fmt.Sprintf("topic %q", name)
			switch {
			case !ok:
				return fmt.Errorf("kafka permissions: topic %s not in the metadata answer", name)
			case kafka.Error(t.ErrorCode) == kafka.TopicAuthorizationFailed:
				return fmt.Errorf("kafka permissions: %w", &Denied{Principal: principal, Resource: res, Op: Describe})
			case t.ErrorCode != 0:
				return fmt.Errorf("kafka permissions: topic %s: %w", name, kafka.Error(t.ErrorCode))
			}
			if err := allowed(t.TopicAuthorizedOperations, need.Topics[name], principal, res); err != nil {
				return err
			}
		}
	}
	for _, g := range need.Groups {
		res := fmt.Sprintf("group %q", g)
		r, err := describeGroup(ctx, tr, addr, g)
		if errors.Is(err, kafka.GroupAuthorizationFailed) {
			return fmt.Errorf("kafka permissions: %w", &Denied{Principal: principal, Resource: res, Op: Read})
		}
		if err != nil {
			return fmt.Errorf("kafka permissions: describe group %s: %w", g, err)
		}
		if err := allowed(r.Groups[0].AuthorizedOperations, []Op{Read}, principal, res); err != nil {
			return err
		}
	}
	if len(need.TransactionalIDs) > 0 {
		kc := &kafka.Client{Addr: addr, Transport: tr}
		for _, id := range need.TransactionalIDs {
			res := fmt.Sprintf("transactional id %q", id)
			err := findTxnCoordinator(ctx, kc, addr, id)
			if errors.Is(err, kafka.TransactionalIDAuthorizationFailed) {
				return fmt.Errorf("kafka permissions: %w", &Denied{Principal: principal, Resource: res, Op: Write})
			}
			if err != nil {
				return fmt.Errorf("kafka permissions: coordinator of transactional id %s: %w", id, err)
			}
		}
	}
	return nil
}

// findTxnCoordinator looks up the coordinator of transactional id id,
// waiting out one that is not ready yet (the transaction log is made at the
// first lookup).
func findTxnCoordinator(ctx context.Context, kc *kafka.Client, addr net.Addr, id string) error {
	for delay := 50 * time.Millisecond; ; delay = min(2*delay, time.Second) {
		fc, err := kc.FindCoordinator(ctx, &kafka.FindCoordinatorRequest{Addr: addr, Key: id, KeyType: kafka.CoordinatorKeyTypeTransaction})
		if err == nil {
			err = fc.Error
		}
		if err == nil || !retriable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(delay):
		}
	}
}

func retriable(err error) bool {
	return errors.Is(err, kafka.NotCoordinatorForGroup) || errors.Is(err, kafka.GroupCoordinatorNotAvailable) ||
		errors.Is(err, kafka.GroupLoadInProgress)
}

// describeGroup asks for the group's authorized operations, waiting out
// a coordinator that is not ready yet (a new cluster makes its offsets
// topic at the first lookup).
func describeGroup(ctx context.Context, tr kafka.RoundTripper, addr net.Addr, g string) (*describegroups.Response, error) {
	for delay := 50 * time.Millisecond; ; delay = min(2*delay, time.Second) {
		r, err := tr.RoundTrip(ctx, addr, &describegroups.Request{Groups: []string{g}, IncludeAuthorizedOperations: true})
		if err == nil {
			dg, ok := r.(*describegroups.Response)
			if !ok || len(dg.Groups) != 1 {
				return nil, fmt.Errorf("unexpected answer %T", r)
			}
			err = kafka.Error(dg.Groups[0].ErrorCode)
			if dg.Groups[0].ErrorCode == 0 {
				return dg, nil
			}
		}
		if !retriable(err) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(delay):
		}
	}
}

// allowed checks ops against a bit field of authorized operations; a field
// the broker did not fill is not checked (the operations themselves still
// are, by the broker, when they happen).
func allowed(field int32, ops []Op, principal, res string) error {
	if field == unknownOps {
		return nil
	}
	for _, o := range ops {
		if field&(1<<o) == 0 {
			return fmt.Errorf("kafka permissions: %w", &Denied{Principal: principal, Resource: res, Op: o})
		}
	}
	return nil
}

// Principal names the principal of a SASL user, or says there is none.
func Principal(saslUser string) string {
	if saslUser == "" {
		return "User:ANONYMOUS (no SASL user; or the client certificate's name)"
	}
	return "User:" + saslUser
}

// IsDenied reports whether err says the principal lacks a permission: a
// *Denied of Check, or an authorization error of the broker. Retrying
// cannot fix it; the caller stops and says so.
func IsDenied(err error) bool {
	var d *Denied
	return errors.As(err, &d) || errors.Is(err, kafka.TopicAuthorizationFailed) || errors.Is(err, kafka.GroupAuthorizationFailed) ||
		errors.Is(err, kafka.TransactionalIDAuthorizationFailed) || errors.Is(err, kafka.ClusterAuthorizationFailed)
}
