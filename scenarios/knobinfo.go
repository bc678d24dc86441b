package scenarios

import "sort"

// enumValues are the accepted values of each enumerated knob, recorded by
// enumKnob as the knob table is built.
var enumValues = map[string][]string{}

// KnobKeys lists every --set key, in the knob table's order.
func KnobKeys() []string { return knobKeys() }

// KnobValues lists the values an enumerated knob accepts, in the order its
// error message gives them; nil for a numeric knob or an unknown key.
func KnobValues(key string) []string {
	return append([]string(nil), enumValues[key]...)
}

// EnumKnobs lists the keys of the enumerated knobs, sorted.
func EnumKnobs() []string {
	out := make([]string, 0, len(enumValues))
	for k := range enumValues {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
