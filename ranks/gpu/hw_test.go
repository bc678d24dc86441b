package gpu_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/ranks/gpu"
	"github.com/collsim/collsim/sim"
)

// The H200's decode-GEMM fit stays within 30 % of every shape
// validation/durations.py timed (Profile.GEMMTime's doc quotes them).
func TestGEMMTimeMatchesH200(t *testing.T) {
	h200, err := gpu.ProfileFor("h200")
	require.NoError(t, err)
	for _, c := range []struct {
		m, k, n int64
		want    sim.Time
	}{
		{8, 8192, 128, 7000},
		{8, 8192, 1024, 9700},
		{8, 4096, 16384, 34400},
		{8, 8192, 32768, 122000},
	} {
		got := h200.GEMMTime(c.m, c.k, c.n)
		require.InDelta(t, float64(c.want), float64(got), 0.3*float64(c.want), "%d×%d by %d×%d", c.m, c.k, c.k, c.n)
	}
}

// A decode GEMM's grid is what validation/kernel_shapes.py saw cuBLAS
// launch on the H200: n/64 tiles or one block per 170.7 KiB of weight,
// doubled from 64 tokens, a full grid (128 blocks) holding every SM.
func TestGEMMLoadGrids(t *testing.T) {
	p, err := gpu.ProfileFor("h200")
	require.NoError(t, err)
	s := p.Share()
	for _, c := range []struct {
		m, k, n int64
		sms     int
	}{
		{8, 4096, 128, 6},
		{8, 4096, 512, 24},
		{8, 8192, 256, 24},
		{8, 8192, 1024, 96},
		{8, 512, 4096, 64},
		{8, 1024, 8192, 132},
		{64, 4096, 128, 12},
		{64, 4096, 512, 48},
		{64, 512, 4096, 132},
	} {
		require.Equal(t, c.sms, s.GEMMLoad(c.m, c.k, c.n).SMs, "%d tokens, %d×%d", c.m, c.k, c.n)
	}
}

// Architecture names pick the datasheet profiles; an unknown name is an
// error naming the choices.
func TestProfileFor(t *testing.T) {
	for arch, name := range map[string]string{"sm80": "a100", "sm90": "h100", "sm100": "b200", "h200": "h200"} {
		p, err := gpu.ProfileFor(arch)
		require.NoError(t, err)
		require.Equal(t, name, p.Name)
	}
	_, err := gpu.ProfileFor("v100")
	require.ErrorContains(t, err, `"v100"`)
}
