package ranks

import (
	"reflect"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/sim"
)

// Values and provenance nodes hold no pointers: a run's megabytes of them
// are nothing the collector scans, and storing one needs no write barrier.
func TestValuesHoldNoPointers(t *testing.T) {
	for _, typ := range []reflect.Type{reflect.TypeFor[Value](), reflect.TypeFor[Prov]()} {
		for i := range typ.NumField() {
			k := typ.Field(i).Type.Kind()
			require.NotContains(t, []reflect.Kind{reflect.Pointer, reflect.Slice, reflect.Map, reflect.String, reflect.Interface, reflect.Func, reflect.Chan, reflect.UnsafePointer},
				k, "%s.%s", typ.Name(), typ.Field(i).Name)
		}
	}
	require.Equal(t, uintptr(16), unsafe.Sizeof(Prov{}))
	require.Equal(t, uintptr(16), unsafe.Sizeof(Value{}))
}

// Terms flattens sums and scalings of sources, combining equal sources and
// dropping those that cancel, whichever walk it takes.
func TestTerms(t *testing.T) {
	w := NewWorld(1, Config{}, sim.NewEngine(sim.Timed, nil))
	src := func(s SourceID) Value { return Value{N: 1, P: w.leaf(s)} }
	a, b, c := src(1), src(2), src(3)
	deep := a
	for range 3000 { // past fastTerms' step bound: the memoised walk
		deep = w.add(deep, b)
	}
	for _, tc := range []struct {
		name string
		v    Value
		want []Term
	}{
		{"uninitialised", Value{}, nil},
		{"source", a, []Term{{1, 1}}},
		{"sum", w.add(b, a), []Term{{1, 1}, {2, 1}}},
		{"sum with nothing", w.add(Value{}, c), []Term{{3, 1}}},
		{"repeat", w.add(a, a), []Term{{1, 2}}},
		{"scaled", w.scale(w.add(a, c), 3), []Term{{1, 3}, {3, 3}}},
		{"cancels", w.add(a, w.scale(a, -1)), []Term{}},
		{"deep", deep, []Term{{1, 1}, {2, 3000}}},
		{"shared twice", w.add(deep, deep), []Term{{1, 2}, {2, 6000}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := w.Srcs.Terms(tc.v)
			if len(tc.want) == 0 {
				require.Empty(t, got)
				return
			}
			require.Equal(t, tc.want, got)
		})
	}
}

// A template's copy reads the template's provenance (its initial values')
// and puts its own nodes after it, never into the template's chunks.
func TestCopyProvenanceAfterTemplate(t *testing.T) {
	w := NewWorld(1, Config{}, sim.NewEngine(sim.Timed, nil))
	x := w.Alloc(0, "x", 64, 2)
	w.Init(x, func(c int) uint64 { return uint64(c) })
	w.SetProgram(0, &Program{Streams: []string{"main"}})
	tm, err := NewTemplate(w)
	require.NoError(t, err)
	c := tm.Instantiate(sim.NewEngine(sim.Timed, nil))
	cx := c.Buffer(x)
	require.Equal(t, "r0:x[1]", c.Srcs.Format(cx.Vals[1]))
	tmplChunks := len(w.provTab.chunks)
	v := c.add(cx.Vals[0], cx.Vals[1])
	require.Greater(t, int(v.P), tmplChunks<<provShift, "the copy's node is past the template's chunks")
	require.Equal(t, "r0:x[0] + r0:x[1]", c.Srcs.Format(v))
	require.Len(t, w.provTab.chunks, tmplChunks)
}
