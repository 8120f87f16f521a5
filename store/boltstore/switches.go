package boltstore

import (
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/mcpgate/mcpgate/store"
	"github.com/mcpgate/mcpgate/store/internal/codec"
)

// bSwitches holds the kill switches (bucket "switches"):
//
//	switches        0x00 → the global switch (JSON, codec.MarshalSwitch)
//	                tenant → that tenant's switch
//
// bbolt keys cannot be empty, and tenants never contain 0x00
// (store.CheckID), so the global switch has the one-byte key 0x00, which
// also sorts first.
var bSwitches = []byte("switches")

func switchKey(tenant string) []byte {
	if tenant == "" {
		return []byte{0}
	}
	return []byte(tenant)
}

// SetSwitch implements store.SwitchStore: one committed (fsynced) write.
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
	return wrap("set switch", s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bSwitches).Put(switchKey(sw.Tenant), val)
	}))
}

// Switches implements store.SwitchStore: one read transaction; the key
// order is the documented order (global, then tenants by bytes).
func (s *Store) Switches(ctx context.Context) ([]store.Switch, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	var out []store.Switch
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bSwitches).ForEach(func(_, v []byte) error {
			sw, err := codec.UnmarshalSwitch(v)
			if err != nil {
				return err
			}
			out = append(out, sw)
			return nil
		})
	})
	if err != nil {
		return nil, wrap("switches", err)
	}
	return out, nil
}
