package main

import (
	"runtime"
	"runtime/debug"
)

// dftGarbageRoom: what the bootstrapping evaluator's DFT generation may allocate before a collection, where
// it runs in Lattigo's big-float arithmetic (a streamed DFT at an encoding precision above
// dft.Precision128; at 53 bits henn generates the diagonals in complex128, 0.3 s and little garbage at
// N = 2^16, and needs no room). Big floats make gigabytes of short-lived objects over a small live heap;
// at the low GOGC henn sets for evaluation (bridge.gc_percent_for) the collector then ran almost without
// pause and took as long as the generation itself. With the keys read (a server) the room adds to the
// peak, so it stays small.
const dftGarbageRoom = 1 << 30

// withGarbageRoom runs f with the collector off until the Go runtime's memory grows `room` bytes past
// its size now (a soft memory limit, never above one already set), then restores both settings.
func withGarbageRoom(room int64, f func() error) error {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	limit := debug.SetMemoryLimit(-1) // -1 reads the limit
	percent := debug.SetGCPercent(-1)
	debug.SetMemoryLimit(min(limit, int64(ms.Sys-ms.HeapReleased)+room))
	defer func() {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
	}()
	return f()
}
