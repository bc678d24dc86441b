package ranks

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// The hot paths' structs keep what every step reads on one cache line: a
// 512-rank ring touches every rank's task and buffers once per step, and
// its speed is how many lines that is.
func TestHotFieldsShareALine(t *testing.T) {
	var tk task
	require.Equal(t, uintptr(256), unsafe.Sizeof(tk), "tasks are 256 bytes, so slabs of them keep each task's first line whole")
	require.LessOrEqual(t, unsafe.Offsetof(tk.op)+unsafe.Sizeof(tk.op), uintptr(64), "a task's step fields fit its first line")
	var b Buffer
	require.Equal(t, uintptr(128), unsafe.Sizeof(b), "buffers are 128 bytes, a size class whose objects start lines")
	require.LessOrEqual(t, unsafe.Offsetof(b.Block)+unsafe.Sizeof(b.Block), uintptr(64), "an access's fields fit a buffer's first line")
	require.Equal(t, uintptr(64), unsafe.Sizeof(msg{}), "a message is one line")
}
