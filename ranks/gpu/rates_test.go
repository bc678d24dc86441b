package gpu_test

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/collsim/collsim/ranks/gpu"
	"github.com/collsim/collsim/sim"
)

func TestShareRatesProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sms := rapid.IntRange(1, 200).Draw(t, "sms")
		keep := rapid.Int64Range(0, 500).Draw(t, "keep")
		hbm := float64(rapid.IntRange(1, 10).Draw(t, "hbm")) * 1e12
		n := rapid.IntRange(1, 8).Draw(t, "n")
		var loads []gpu.Load
		var alone []sim.Time
		for i := range n {
			loads = append(loads, gpu.Load{SMs: rapid.IntRange(0, 250).Draw(t, fmt.Sprint("sms", i)), Bytes: rapid.Int64Range(0, 1e8).Draw(t, fmt.Sprint("bytes", i))})
			alone = append(alone, sim.Time(rapid.IntRange(1, 1e6).Draw(t, fmt.Sprint("alone", i))))
		}
		r := gpu.ShareRates(sms, keep, hbm, loads, alone)
		var smsUsed, want int64
		for i, x := range r {
			if x > 1_000_000 || x < 0 {
				t.Fatalf("rate %d out of range: %v", i, r)
			}
			smsUsed += x * int64(min(loads[i].SMs, sms)) // a larger grid wants the GPU
			want += int64(loads[i].SMs)
		}
		// the SMs handed out never exceed the GPU's
		if smsUsed > int64(sms)*1_000_000+int64(n)*250 {
			t.Fatalf("rates %v use %d µSMs of %d", r, smsUsed, sms*1_000_000)
		}
		// the first kernel always progresses (nothing can starve the GPU)
		if r[0] == 0 {
			t.Fatalf("first kernel starved: %v", r)
		}
		// a lone kernel runs as alone
		if n == 1 && r[0] != 1_000_000 {
			t.Fatalf("lone kernel at %d", r[0])
		}
		// room for every kernel's SMs and bytes: nobody slows down
		var bw float64
		for i, l := range loads {
			bw += min(float64(l.Bytes)/float64(alone[i])*1e9, hbm)
		}
		if want <= int64(sms) && bw <= hbm*0.999 {
			for i, x := range r {
				if x < 999_990 {
					t.Fatalf("kernel %d slowed to %d with room for all: %v", i, x, r)
				}
			}
		}
		// One more co-runner never speeds a kernel up through the SMs. (With
		// bandwidth it can: a co-runner that takes SMs from a kernel that
		// floods the memory leaves more bandwidth to the others, so the
		// check drops the bytes.)
		sm := make([]gpu.Load, n)
		for i, l := range loads {
			sm[i] = gpu.Load{SMs: l.SMs}
		}
		r0 := gpu.ShareRates(sms, keep, hbm, sm, alone)
		more := gpu.ShareRates(sms, keep, hbm,
			append(sm, gpu.Load{SMs: rapid.IntRange(0, 250).Draw(t, "sms+")}),
			append(alone[:n:n], sim.Time(rapid.IntRange(1, 1e6).Draw(t, "alone+"))))
		for i := range r0 {
			if more[i] > r0[i]+1 {
				t.Fatalf("kernel %d sped up by a co-runner: %v → %v", i, r0, more)
			}
		}
	})
}

// Two kernels that each fill a 132-SM GPU, and a small one: the first to
// start gets what the others do not keep (88 %), the later ones the 10 %
// of their SMs each keeps.
func ExampleShareRates() {
	full, small := gpu.Load{SMs: 132}, gpu.Load{SMs: 24}
	r := gpu.ShareRates(132, 100, 4.17e12, []gpu.Load{full, full, small}, []sim.Time{35000, 35000, 7600})
	fmt.Println(r)
	// Output: [881817 99999 99999]
}

func BenchmarkShareRates(b *testing.B) {
	loads := []gpu.Load{{SMs: 132, Bytes: 134 << 20}, {SMs: 24, Bytes: 4 << 20}, {SMs: 32, Bytes: 1 << 20}, {SMs: 128, Bytes: 33 << 20}}
	alone := []sim.Time{35000, 7600, 2000, 13000}
	for b.Loop() {
		gpu.ShareRates(132, 100, 4.17e12, loads, alone)
	}
}
