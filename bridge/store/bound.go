package store

import "errors"

// Bound is the lookup of what an operation key is bound to, for the
// idempotency of a keyed request: given a lookup's result (v, err), it
// reports bound false when the key is free (ErrNotFound), and returns any
// other error. A bound key answers a repeat of its request with the
// recorded outcome, and another request with a conflict.
func Bound[T any](v T, err error) (got T, bound bool, _ error) {
	switch {
	case errors.Is(err, ErrNotFound):
		return got, false, nil
	case err != nil:
		return got, false, err
	}
	return v, true, nil
}
