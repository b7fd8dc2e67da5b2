package redisperm

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/internal/testenv"
)

// TestCheck: a user with exactly the ACL line of docs/operations.md passes;
// one without a command of it, or held to other keys, fails naming the
// command and the key; nothing the check queues is run.
func TestCheck(t *testing.T) {
	admin := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr()})
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prefix := testenv.UniqueName("redisperm")
	_, rules := testenv.DocRedisACL(t, prefix, "pw-"+prefix)
	without := func(drop string) []string {
		return slices.DeleteFunc(slices.Clone(rules), func(r string) bool { return r == drop })
	}
	otherKeys := slices.Clone(rules)
	for i, r := range otherKeys {
		if strings.HasPrefix(r, "~") {
			otherKeys[i] = "~{other:*"
		}
	}
	for _, tc := range []struct {
		name    string
		rules   []string
		wantErr string // "" = passes
	}{
		{"the documented line", rules, ""},
		{"without evalsha", without("+evalsha"), "may not run EVALSHA on key {" + prefix + ":probe}: NOPERM"},
		{"without xadd", without("+xadd"), "may not run XADD on key"},
		{"without script load", without("+script|load"), "may not run SCRIPT LOAD on key"},
		{"other keys", otherKeys, "may not run EVAL on key {" + prefix + ":probe}: NOPERM"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			user := testenv.UniqueName("redisperm-user")
			args := []any{"acl", "setuser", user}
			for _, r := range tc.rules {
				args = append(args, r)
			}
			if err := admin.Do(ctx, args...).Err(); err != nil {
				t.Fatalf("ACL SETUSER: %v", err)
			}
			t.Cleanup(func() { admin.Do(context.Background(), "acl", "deluser", user) })
			c := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(), Username: user, Password: "pw-" + prefix})
			defer c.Close()
			start := time.Now()
			err := Check(ctx, c, user, prefix)
			t.Logf("took %v: %v", time.Since(start).Round(time.Microsecond), err)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Check: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Check: %v, want an error saying %q", err, tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), "redis user "+user):
				t.Errorf("%v does not name the user", err)
			}
			k, k2 := ProbeKey(prefix)
			if n, err := admin.Exists(ctx, k, k2).Result(); err != nil || n != 0 {
				t.Errorf("the probe keys exist (%d, %v): a queued command ran", n, err)
			}
		})
	}
}

// TestDocLineCoversProbe: every command the check queues is granted by the
// documented line, and the line grants no command the check does not know
// but the connection's and the transaction's own.
func TestDocLineCoversProbe(t *testing.T) {
	_, rules := testenv.DocRedisACL(t, "nofly", "x")
	granted := map[string]bool{}
	for _, r := range rules {
		if strings.HasPrefix(r, "+") {
			granted[r[1:]] = true
		}
	}
	probed := map[string]bool{}
	for _, c := range Commands("k", "k2") {
		name := c[0].(string)
		if name == "script" || name == "xinfo" {
			name += "|" + c[1].(string)
		}
		probed[name] = true
		if !granted[name] {
			t.Errorf("the check queues %s, which the documented line does not grant", name)
		}
	}
	unprobed := []string{"hello", "auth", "client|setname", "cluster|slots", "cluster|shards", "readonly", "multi", "exec", "discard"}
	for g := range granted {
		if !probed[g] && !slices.Contains(unprobed, g) {
			t.Errorf("the documented line grants %s, which the check does not queue", g)
		}
	}
}
