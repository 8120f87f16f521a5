package boltstore

import bolt "go.etcd.io/bbolt"

// SessionKeys counts the entries of the sessions and session_expiry
// buckets, expired ones included.
func SessionKeys(s *Store) (sessions, expiry int) {
	_ = s.db.View(func(tx *bolt.Tx) error {
		sessions = tx.Bucket(bSessions).Stats().KeyN
		expiry = tx.Bucket(bSessionExpiry).Stats().KeyN
		return nil
	})
	return sessions, expiry
}
