package main

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"
)

// killClientsNamed closes (CLIENT KILL ID) every connection whose client
// name is name, and returns how many it closed. Only those: the server is
// shared with other tests.
func killClientsNamed(ctx context.Context, c *redis.Client, name string) int {
	list, err := c.ClientList(ctx).Result()
	if err != nil {
		return 0
	}
	n := 0
	for _, line := range strings.Split(list, "\n") {
		var id string
		named := false
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "id="); ok {
				id = v
			}
			if f == "name="+name {
				named = true
			}
		}
		if named && id != "" && c.Do(ctx, "CLIENT", "KILL", "ID", id).Err() == nil {
			n++
		}
	}
	return n
}
