// ckpt_go [STEPS=100] [MS=20]: a Go program (its runtime: threads it makes itself, goroutines
// moved between them, a garbage collector, async preemption by SIGURG, timers, the vDSO read
// through the runtime's own ELF parser). Eight worker goroutines take work from a channel; each
// step sends them eight items, waits for their results, keeps a little garbage, prints `step K`;
// then `DONE checksum=... steps=STEPS` over the results. Built as crac needs a Go program: with
// cgo (a getpid call) and -buildmode=pie (tests/test_ckpt_go.py).
package main

// #include <unistd.h>
import "C"

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

func arg(i, def int) int {
	if len(os.Args) > i {
		if v, err := strconv.Atoi(os.Args[i]); err == nil {
			return v
		}
	}
	return def
}

func main() {
	steps, ms := arg(1, 100), arg(2, 20)
	if C.getpid() <= 0 {
		fmt.Fprintln(os.Stderr, "ckpt_go: getpid failed")
		os.Exit(1)
	}
	work := make(chan int)
	results := make(chan uint64)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for v := range work {
				var s uint64
				for i := 0; i < 100000; i++ {
					s += uint64(v*i) % 7
				}
				results <- s
			}
		}()
	}
	h := uint64(0xcbf29ce484222325)
	garbage := map[int][]byte{}
	for k := 1; k <= steps; k++ {
		go func() {
			for j := 0; j < 8; j++ {
				work <- k*8 + j
			}
		}()
		var sum uint64
		for j := 0; j < 8; j++ {
			sum += <-results
		}
		garbage[k%50] = make([]byte, 1<<16)
		for i := 0; i < 8; i++ {
			h ^= (sum >> (8 * i)) & 0xff
			h *= 0x100000001b3
		}
		fmt.Printf("step %d\n", k)
		time.Sleep(time.Duration(ms) * time.Millisecond)
	}
	close(work)
	wg.Wait()
	fmt.Printf("DONE checksum=%016x steps=%d\n", h, steps)
}
