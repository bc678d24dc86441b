package main

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// physicalMemory is the machine's RAM in bytes (0: unknown).
func physicalMemory() int64 {
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit)
}

// addressSpaceLimit is RLIMIT_AS (ulimit -v) in bytes (0: none; the
// unlimited value is all ones).
func addressSpaceLimit() int64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &r); err != nil || r.Cur > 1<<62 {
		return 0
	}
	return int64(r.Cur)
}

// addressSpaceUsed is the process's mapped address space (VmSize, the
// first field of /proc/self/statm, in pages), what RLIMIT_AS counts (0:
// unknown).
func addressSpaceUsed() int64 {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f, _, _ := bytes.Cut(data, []byte(" "))
	pages, err := strconv.ParseInt(string(f), 10, 64)
	if err != nil {
		return 0
	}
	return pages * int64(os.Getpagesize())
}

// fewerMallocArenas re-executes simctl with MALLOC_ARENA_MAX=1 when the
// process runs under an address-space limit (ulimit -v) and the variable
// is unset. simctl links the C library (the flag package's net import
// brings cgo), and glibc reserves a 64 MiB malloc arena per thread that
// calls it, up to eight per core: about 320 MB of a 2 GiB limit before
// anything runs, which the Go heap then lacks. Go's own heap does not use
// malloc, so one arena costs nothing. Where the exec fails, simctl runs
// on as it is.
func fewerMallocArenas() {
	if addressSpaceLimit() <= 0 || os.Getenv("MALLOC_ARENA_MAX") != "" {
		return
	}
	_ = syscall.Exec("/proc/self/exe", os.Args, append(os.Environ(), "MALLOC_ARENA_MAX=1"))
}
