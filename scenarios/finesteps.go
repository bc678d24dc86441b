package scenarios

// WithFineSteps returns s with every world built micro-op by micro-op
// ([Config.FineSteps]) when on, for every variant and every reference to
// another variant; s itself when off. s is not changed: a built-in stays
// as registered.
func (s *Scenario) WithFineSteps(on bool) *Scenario {
	if !on {
		return s
	}
	c := *s
	c.Base.FineSteps = true
	return &c
}
