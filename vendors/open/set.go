package open

import (
	"errors"

	"github.com/tangle-network/boxctl/vendors"
)

// Set opens the vendor of each target once, when first asked for it,
// for a caller that works on boxes of several vendors; Close closes every
// vendor it opened. It is not safe for concurrent use.
type Set struct {
	o      Options
	opened map[string]Closer
	order  []Closer
}

// NewSet returns a Set that opens vendors with o.
func NewSet(o Options) *Set { return &Set{o: o, opened: map[string]Closer{}} }

// Vendor returns the vendor of target, opening it the first time.
func (s *Set) Vendor(target string) (Closer, error) {
	if v, ok := s.opened[target]; ok {
		return v, nil
	}
	v, err := Vendor(target, s.o)
	if err != nil {
		return nil, err
	}
	s.opened[target], s.order = v, append(s.order, v)
	return v, nil
}

// Close closes every vendor the set opened, and forgets them.
func (s *Set) Close() error {
	var errs []error
	for _, v := range s.order {
		errs = append(errs, v.Close())
	}
	s.opened, s.order = map[string]Closer{}, nil
	return errors.Join(errs...)
}

// Opener is s.Vendor as a function of vendors.Vendor, for a caller that
// takes a vendor opener.
func (s *Set) Opener() func(target string) (vendors.Vendor, error) {
	return func(target string) (vendors.Vendor, error) { return s.Vendor(target) }
}
