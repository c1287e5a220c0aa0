package e2b

// BoxOf returns a box of sandbox id with the contract's envd token,
// without a call, for the contract tests.
func BoxOf(v *Vendor, id string) *Box {
	return (&Box{v: v, id: id, domain: v.o.domain, accessToken: "envd-token"}).withProcs()
}
