// Package cachealloc is PyTorch's CUDA caching allocator
// (c10/cuda/CUDACachingAllocator.cpp) as a pure state machine of one
// rank: malloc, free, record_stream, synchronize, empty_cache and graph
// capture go in, in host issue order; blocks with their addresses,
// segments and overlaps with earlier blocks come out, with a log of every
// decision.
//
// It owns the pools, segments, block splitting and merging, deferred
// frees and capture pools, and nothing else: it knows no tensor values,
// chunks, clocks or findings. The world (package ranks) makes a tensor for
// each block, links the chunks of blocks that overlap (a use after free is
// a race on shared memory) and turns [Block.CaptureMalloc] into a finding.
// It imports nothing of the simulator.
//
// testdata/alloc_h200.json is where PyTorch put every block on an H200
// (recorded by validation/alloc_placement.py); the tests replay it, and
// compare the allocator with a naive page-map reference under random
// sequences.
package cachealloc
