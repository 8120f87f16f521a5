package redisstore

import "github.com/redis/go-redis/v9"

// Client returns the store's Redis client, for state kept beside the
// store on the same server (e.g. ratelimit.NewRedis's buckets). Closing
// the store closes it.
func (s *Store) Client() redis.UniversalClient { return s.rdb }
