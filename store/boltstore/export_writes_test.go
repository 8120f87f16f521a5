package boltstore

import bolt "go.etcd.io/bbolt"

// WriteKeys counts the entries of each write-safety bucket, expired ones
// included, by bucket name.
func WriteKeys(s *Store) map[string]int {
	out := map[string]int{}
	_ = s.db.View(func(tx *bolt.Tx) error {
		for _, b := range writeBuckets {
			out[string(b)] = tx.Bucket(b).Stats().KeyN
		}
		return nil
	})
	return out
}
