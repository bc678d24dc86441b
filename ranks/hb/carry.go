package hb

import "slices"

// Carry says which clock entries each lane keeps: the carry filter that
// package ranks computes statically from the programs (ranks/carry.go
// says why it loses no happens-before edge a race check can see), and
// applies on every acquire.
type Carry struct {
	Need [][]int32 // per lane X: the other lanes whose entries X's clock keeps, sorted
	All  []bool    // per lane L: L's entry is kept everywhere (not narrowed)
}

// Filter returns the entries of o that lane x keeps, in buf's storage.
func (c *Carry) Filter(x int32, o []Entry, buf []Entry) []Entry {
	need, all := c.Need[x], c.All
	out := buf[:0]
	j := 0
	for _, e := range o {
		if e.Lane == x || all[e.Lane] {
			out = append(out, e)
			continue
		}
		if len(need) > 8*len(o) {
			if _, ok := slices.BinarySearch(need, e.Lane); ok {
				out = append(out, e)
			}
			continue
		}
		for j < len(need) && need[j] < e.Lane {
			j++
		}
		if j < len(need) && need[j] == e.Lane {
			out = append(out, e)
		}
	}
	return out
}
