package knobs

import "sort"

// enumValues are the accepted values of each enumerated knob, recorded by
// enumKnob as the knob table is built.
var enumValues = map[string][]string{}

// Keys lists every --set key, in the knob table's order.
func Keys() []string {
	out := make([]string, len(knobs))
	for i, k := range knobs {
		out[i] = k.key
	}
	return out
}

// Values lists the values an enumerated knob accepts, in the order its
// error message gives them; nil for a numeric knob or an unknown key.
func Values(key string) []string {
	return append([]string(nil), enumValues[key]...)
}

// Enums lists the keys of the enumerated knobs, sorted.
func Enums() []string {
	out := make([]string, 0, len(enumValues))
	for k := range enumValues {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Knob is one knob: its --set key, its help, and how it reads and writes
// a [Config].
type Knob struct{ k knob }

// Key is the knob's --set key.
func (k Knob) Key() string { return k.k.key }

// Get is the knob's value in c ("" for a knob c leaves unset).
func (k Knob) Get(c *Config) string { return k.k.get(c) }

// Set sets the knob in c, or says why value is not one of its values.
func (k Knob) Set(c *Config, value string) error { return k.k.set(c, value) }

// All lists the knobs in the knob table's order.
func All() []Knob {
	out := make([]Knob, len(knobs))
	for i, k := range knobs {
		out[i] = Knob{k}
	}
	return out
}

// Get is key's value in c: a knob's, or a file-declared param's ("" for
// neither).
func Get(c *Config, key string) string {
	for _, k := range knobs {
		if k.key == key {
			return k.get(c)
		}
	}
	v, _ := c.Param(key)
	return v
}

// Known reports whether key is a knob.
func Known(key string) bool {
	for _, k := range knobs {
		if k.key == key {
			return true
		}
	}
	return false
}
