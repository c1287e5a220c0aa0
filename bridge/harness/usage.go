package harness

// Tokens is a token count a harness reports optionally: 0 when it did not
// report it.
func Tokens(n *int64) int64 {
	if n == nil {
		return 0
	}
	return *n
}

// AddTokens is the optional count acc (nil: none reported yet) with n
// added: a count is reported once any step reported it.
func AddTokens(acc *int64, n int64) *int64 {
	sum := n
	if acc != nil {
		sum += *acc
	}
	return &sum
}
