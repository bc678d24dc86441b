package scenarios

import "strings"

// OneLine is the first sentence of the scenario's description, on one line,
// for listings.
func (s *Scenario) OneLine() string {
	d := strings.Join(strings.Fields(s.Description), " ")
	for i := 0; i+1 < len(d); i++ {
		if d[i] == '.' && d[i+1] == ' ' {
			return d[:i+1]
		}
	}
	return d
}
