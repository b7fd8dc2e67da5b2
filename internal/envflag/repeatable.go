package envflag

import "strings"

// Repeatable is a list flag each use of which adds to the list, a
// comma-separated value adding each item (so the environment variable
// takes the whole list); blanks around items are dropped. Set("") adds
// nothing.
type Repeatable []string

func (l *Repeatable) String() string { return strings.Join(*l, ",") }

// Set adds the items of s.
func (l *Repeatable) Set(s string) error {
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}
