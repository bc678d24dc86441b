// Package hb is the happens-before machinery's data: vector clocks over
// lanes ([VC]: sparse, or dense for a world of at most [DenseLanes]
// lanes), the carry filter that narrows what an acquire keeps ([Carry]),
// and the recycling of the clock snapshots releases hand out ([Pool]).
//
// It is pure and imports nothing of the simulator. Package ranks decides
// which lanes exist and share memory, when a lane releases or acquires,
// and what the filter keeps (ranks/clock.go, ranks/carry.go); its race
// checks are one query each: an epoch's clock against [VC.Get]. The
// property here compares both clock forms with a naive dense array;
// ranks' own tests compare the filtered, recycled clocks with full ones
// over whole runs.
package hb
