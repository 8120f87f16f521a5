package store

import (
	"errors"
	"fmt"
)

// Wrap names the operation op on a backend error: nil stays nil, the
// store's own errors pass unchanged (callers test them with errors.Is),
// closed (the backend's "closed" error) becomes ErrClosed, anything else is
// wrapped as "op: err".
func Wrap(op string, err, closed error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, closed):
		return fmt.Errorf("%s: %w", op, ErrClosed)
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrExists),
		errors.Is(err, ErrInvalid), errors.Is(err, ErrClosed), errors.Is(err, ErrConflict):
		return err
	}
	return fmt.Errorf("%s: %w", op, err)
}
