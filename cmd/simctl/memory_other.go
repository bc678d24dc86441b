//go:build !linux

package main

// physicalMemory is unknown here: defaultMaxMemory falls back to 8 GiB.
func physicalMemory() int64 { return 0 }

// addressSpaceLimit is not read here.
func addressSpaceLimit() int64 { return 0 }

// addressSpaceUsed is not read here.
func addressSpaceUsed() int64 { return 0 }

// fewerMallocArenas does nothing here.
func fewerMallocArenas() {}
