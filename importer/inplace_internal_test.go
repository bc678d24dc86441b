package importer

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestInPlaceNames(t *testing.T) {
	for name, want := range map[string]bool{
		"aten::mul_":           true,
		"aten::_foreach_copy_": true,
		"aten::copy_":          true,
		"aten::mul":            false,
		"aten::_foreach_add":   false,
		"aten::__iand__":       false,
		"aten::_":              false,
		"record_param_comms":   false,
		"c10d::allreduce_":     true,
	} {
		require.Equal(t, want, inPlace(name), name)
	}
}
