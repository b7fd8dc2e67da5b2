//go:build !unix

package httpserve

// FDLimit is unknown here (0): the cap is taken as configured.
func FDLimit() uint64 { return 0 }
