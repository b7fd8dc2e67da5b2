package authorization

import "encoding/json"

// UnmarshalJSON reads what MarshalJSON writes ("all", or {"ids": [...],
// "categories": [...]}), held to the rules a request is: a stored
// authorisation (authorization/authstore) reads back as the value it was.
func (z *Zones) UnmarshalJSON(b []byte) error {
	v, err := parseZones(json.RawMessage(b))
	if err != nil {
		return err
	}
	if err := checkZones(&v); err != nil {
		return err
	}
	*z = v
	return nil
}
