package redisstore

import (
	"context"
	"fmt"
	"sort"

	"github.com/mcpgate/mcpgate/store"
	"github.com/mcpgate/mcpgate/store/internal/codec"
)

// Kill switches live in one hash, so that a replica reads them all in one
// HGETALL (the kill switch watcher polls it a few times a second):
//
//	switch    hash: tenant ("" for the global switch) → switch (JSON, codec.MarshalSwitch)
//
// HSET replaces one scope's state atomically; the last write wins.
func (s *Store) kSwitch() string { return s.p + "switch" }

// SetSwitch implements store.SwitchStore: one HSET.
func (s *Store) SetSwitch(ctx context.Context, sw store.Switch) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if err := sw.Validate(); err != nil {
		return err
	}
	val, err := codec.MarshalSwitch(sw)
	if err != nil {
		return fmt.Errorf("set switch: %w", err)
	}
	return wrap("set switch", s.rdb.HSet(ctx, s.kSwitch(), sw.Tenant, val).Err())
}

// Switches implements store.SwitchStore: one HGETALL.
func (s *Store) Switches(ctx context.Context) ([]store.Switch, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	m, err := s.rdb.HGetAll(ctx, s.kSwitch()).Result()
	if err != nil {
		return nil, wrap("switches", err)
	}
	out := make([]store.Switch, 0, len(m))
	for field, v := range m {
		sw, err := codec.UnmarshalSwitch([]byte(v))
		if err != nil {
			return nil, fmt.Errorf("switches: %w", err)
		}
		if sw.Tenant != field {
			return nil, fmt.Errorf("switches: field %q holds the switch of %q", field, sw.Tenant)
		}
		out = append(out, sw)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tenant < out[j].Tenant })
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}
