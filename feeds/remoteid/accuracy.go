package remoteid

// Accuracy classes (ASTM F3411 Table 1, from ADS-B NACp and GVA) as the
// bound in metres each promises. The open-ended "more than" classes and
// "unknown" have none.
var (
	horizontalRID = map[string]float64{
		"HA10NM": 18520, "HA4NM": 7408, "HA2NM": 3704, "HA1NM": 1852, "HA05NM": 926, "HA03NM": 555.6,
		"HA01NM": 185.2, "HA005NM": 92.6, "HA30m": 30, "HA10m": 10, "HA3m": 3, "HA1m": 1,
	}
	verticalRID = map[string]float64{
		"VA150m": 150, "VA45m": 45, "VA25m": 25, "VA10m": 10, "VA3m": 3, "VA1m": 1,
	}
	// The same classes as OpenDroneID numbers them (0 unknown, 1 the
	// open-ended class).
	horizontalODID = map[int]float64{2: 18520, 3: 7408, 4: 3704, 5: 1852, 6: 926, 7: 555.6, 8: 185.2, 9: 92.6, 10: 30, 11: 10, 12: 3, 13: 1}
	verticalODID   = map[int]float64{2: 150, 3: 45, 4: 25, 5: 10, 6: 3, 7: 1}
)

func classRID(m map[string]float64, s *string) *float64 {
	if s == nil {
		return nil
	}
	if v, ok := m[*s]; ok {
		return &v
	}
	return nil
}

func classODID(m map[int]float64, n *int) *float64 {
	if n == nil {
		return nil
	}
	if v, ok := m[*n]; ok {
		return &v
	}
	return nil
}
