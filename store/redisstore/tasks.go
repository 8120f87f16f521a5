package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpgate/mcpgate/store"
)

// Task bindings (see the package comment for the other keys):
//
//	task:<len(upstream)>:<upstream>:<task id>   hash: connection, tenant,
//	                                            subject, tool; PEXPIRE ttl
//
// The upstream's length keeps two (upstream, task id) pairs from sharing a
// key whatever characters they hold.
func (s *Store) kTask(upstream, taskID string) string {
	return s.p + "task:" + strconv.Itoa(len(upstream)) + ":" + upstream + ":" + taskID
}

// bindTask: KEYS task; ARGV connection, tenant, subject, tool, ttl ms.
// Returns 1, or 0 if the task is bound to another principal or tool.
var bindTask = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'connection', 'tenant', 'subject', 'tool')
if cur[1] then
  if cur[1] ~= ARGV[1] or cur[2] ~= ARGV[2] or cur[3] ~= ARGV[3] or cur[4] ~= ARGV[4] then return 0 end
else
  redis.call('HSET', KEYS[1], 'connection', ARGV[1], 'tenant', ARGV[2], 'subject', ARGV[3], 'tool', ARGV[4])
end
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1
`)

// BindTask implements store.TaskStore; Redis expires the key.
func (s *Store) BindTask(ctx context.Context, upstream, taskID string, b store.TaskBinding, ttl time.Duration) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if err := store.CheckTaskBinding(upstream, taskID, b, ttl); err != nil {
		return err
	}
	ms := (ttl + time.Millisecond - 1) / time.Millisecond
	n, err := bindTask.Run(ctx, s.rdb, []string{s.kTask(upstream, taskID)},
		b.Connection, b.Tenant, b.Subject, b.Tool, strconv.FormatInt(int64(ms), 10)).Int()
	switch {
	case err != nil:
		return wrap("bind task", err)
	case n == 0:
		return fmt.Errorf("task: %w", store.ErrExists)
	}
	return nil
}

// Task implements store.TaskStore.
func (s *Store) Task(ctx context.Context, upstream, taskID string) (store.TaskBinding, error) {
	if err := s.check(ctx); err != nil {
		return store.TaskBinding{}, err
	}
	if err := store.CheckTaskKey(upstream, taskID); err != nil {
		return store.TaskBinding{}, err
	}
	m, err := s.rdb.HGetAll(ctx, s.kTask(upstream, taskID)).Result()
	if err != nil {
		return store.TaskBinding{}, wrap("task", err)
	}
	if len(m) == 0 {
		return store.TaskBinding{}, fmt.Errorf("task: %w", store.ErrNotFound)
	}
	return store.TaskBinding{Connection: m["connection"], Tenant: m["tenant"], Subject: m["subject"], Tool: m["tool"]}, nil
}
