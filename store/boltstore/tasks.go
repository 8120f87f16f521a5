package boltstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mcpgate/mcpgate/store"
	"github.com/mcpgate/mcpgate/store/internal/codec"
)

// Task bindings live in two buckets (see the package comment):
//
//	tasks         upstream 0x00 task id → binding and expiry (JSON)
//	task_expiry   time(8) upstream 0x00 task id → ""   for the sweeper
var (
	bTasks      = []byte("tasks")
	bTaskExpiry = []byte("task_expiry")
)

type task struct {
	Connection string `json:"connection"`
	Tenant     string `json:"tenant,omitempty"`
	Subject    string `json:"subject,omitempty"`
	Tool       string `json:"tool"`
	ExpiresUS  int64  `json:"expires_us"`
}

func (v task) binding() store.TaskBinding {
	return store.TaskBinding{Connection: v.Connection, Tenant: v.Tenant, Subject: v.Subject, Tool: v.Tool}
}

// taskKey is upstream 0x00 task id (neither contains a NUL byte).
func taskKey(upstream, taskID string) string { return upstream + "\x00" + taskID }

// taskBuckets returns the task buckets, creating them in a write
// transaction (a file written before tasks existed has none).
func taskBuckets(tx *bolt.Tx) (tasks, expiry *bolt.Bucket, err error) {
	if !tx.Writable() {
		return tx.Bucket(bTasks), tx.Bucket(bTaskExpiry), nil
	}
	if tasks, err = tx.CreateBucketIfNotExists(bTasks); err != nil {
		return nil, nil, err
	}
	expiry, err = tx.CreateBucketIfNotExists(bTaskExpiry)
	return tasks, expiry, err
}

func getTask(b *bolt.Bucket, key string) (task, bool, error) {
	if b == nil {
		return task{}, false, nil
	}
	raw := b.Get([]byte(key))
	if raw == nil {
		return task{}, false, nil
	}
	var v task
	if err := json.Unmarshal(raw, &v); err != nil {
		return task{}, false, fmt.Errorf("decode task: %w", err)
	}
	return v, true, nil
}

// BindTask implements store.TaskStore.
func (s *Store) BindTask(ctx context.Context, upstream, taskID string, b store.TaskBinding, ttl time.Duration) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if err := store.CheckTaskBinding(upstream, taskID, b, ttl); err != nil {
		return err
	}
	ttl = (ttl + time.Millisecond - 1).Truncate(time.Millisecond)
	key := taskKey(upstream, taskID)
	return wrap("bind task", s.db.Update(func(tx *bolt.Tx) error {
		tasks, expiry, err := taskBuckets(tx)
		if err != nil {
			return err
		}
		now := s.now()
		cur, ok, err := getTask(tasks, key)
		if err != nil {
			return err
		}
		if ok {
			exp := codec.FromMicros(cur.ExpiresUS)
			if now.Before(exp) && cur.binding() != b {
				return fmt.Errorf("task: %w", store.ErrExists)
			}
			if err := expiry.Delete(indexKey("", exp, key)); err != nil {
				return err
			}
		}
		exp := now.Add(ttl)
		val, err := json.Marshal(task{Connection: b.Connection, Tenant: b.Tenant, Subject: b.Subject, Tool: b.Tool, ExpiresUS: codec.Micros(exp)})
		if err != nil {
			return err
		}
		return errors.Join(
			tasks.Put([]byte(key), val),
			expiry.Put(indexKey("", exp, key), nil),
		)
	}))
}

// Task implements store.TaskStore.
func (s *Store) Task(ctx context.Context, upstream, taskID string) (store.TaskBinding, error) {
	if err := s.check(ctx); err != nil {
		return store.TaskBinding{}, err
	}
	if err := store.CheckTaskKey(upstream, taskID); err != nil {
		return store.TaskBinding{}, err
	}
	var b store.TaskBinding
	err := s.db.View(func(tx *bolt.Tx) error {
		cur, ok, err := getTask(tx.Bucket(bTasks), taskKey(upstream, taskID))
		if err != nil {
			return err
		}
		if !ok || !s.now().Before(codec.FromMicros(cur.ExpiresUS)) {
			return fmt.Errorf("task: %w", store.ErrNotFound)
		}
		b = cur.binding()
		return nil
	})
	return b, wrap("task", err)
}

// SweepTasks deletes the task bindings that expired by now and returns how
// many. The sweeper calls it; tests may too.
func (s *Store) SweepTasks(ctx context.Context) (int, error) {
	return s.sweep(ctx, "sweep tasks", func(tx *bolt.Tx, limit []byte) (int, error) {
		tasks, expiry, err := taskBuckets(tx)
		if err != nil {
			return 0, err
		}
		return sweepIndexed(tasks, expiry, limit)
	})
}
