package boltstore

// CachedTokens is the number of tokens in s's TokenByHash cache.
func CachedTokens(s *Store) int { return s.tokens.size() }

// SetAfterTokenRead makes TokenByHash call fn after its read transaction
// and before it caches what it read (nil: nothing).
func SetAfterTokenRead(s *Store, fn func()) { s.afterTokenRead = fn }
