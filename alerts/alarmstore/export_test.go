package alarmstore

// SetMinPage sets the smallest first page of a source, returning the old.
func SetMinPage(n int64) int64 {
	old := minPage
	minPage = n
	return old
}

// SetMaxExamine sets the most alarms a List request examines, returning
// the old.
func SetMaxExamine(n int) int {
	old := maxExamine
	maxExamine = n
	return old
}
