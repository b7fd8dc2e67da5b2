package alarmstore

// SetMinPage sets the smallest first page of a source, returning the old.
func SetMinPage(n int64) int64 {
	old := minPage
	minPage = n
	return old
}
