package telemetry

// accuracy reads an optional accuracy bound: a number >= 0, or dropped with
// a warning. It plays no part in the alarm, so nothing is refused over it.
func accuracy(o *optNum, field string, warns []FieldWarning) (float64, bool, []FieldWarning) {
	v, ok, warns := number(o, field, warns)
	switch {
	case ok && v < 0:
		return 0, false, append(warns, FieldWarning{field, formatFloat(v) + " is negative; dropped"})
	case ok && v > MaxAccuracyM:
		return 0, false, append(warns, FieldWarning{field, outOfRange(v, 0, MaxAccuracyM, "m", "")})
	}
	return v, ok, warns
}

// appendAccuracy appends h_accuracy_m and v_accuracy_m when set.
func appendAccuracy(dst []byte, p *Position) []byte {
	if p.HAccuracyM != nil {
		dst = append(dst, `,"h_accuracy_m":`...)
		dst = appendFloat(dst, *p.HAccuracyM)
	}
	if p.VAccuracyM != nil {
		dst = append(dst, `,"v_accuracy_m":`...)
		dst = appendFloat(dst, *p.VAccuracyM)
	}
	return dst
}
