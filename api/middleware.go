package api

import "context"

// reqInfo is what the request-log middleware learns from the inner
// handlers: the caller's token name.
type reqInfo struct {
	caller string
}

type reqInfoKey struct{}

func reqInfoFrom(ctx context.Context) *reqInfo {
	ri, _ := ctx.Value(reqInfoKey{}).(*reqInfo)
	return ri
}
