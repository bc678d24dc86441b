package scenarios

// Load parses and validates a scenario file and returns the runnable
// scenario.
func Load(file string, data []byte) (*Scenario, error) {
	s, err := LoadSpec(file, data)
	if err != nil {
		return nil, err
	}
	return ScenarioOf(s), nil
}
