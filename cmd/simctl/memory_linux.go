package main

import "syscall"

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
