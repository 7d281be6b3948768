package main

import (
	"os"
	"runtime"
	"runtime/pprof"
	"time"
)

func init() {
	p := os.Getenv("REEL_HEAPPROF")
	if p == "" {
		return
	}
	cf, _ := os.Create(p + ".cpu")
	pprof.StartCPUProfile(cf)
	go func() {
		for i := 0; ; i++ {
			time.Sleep(5 * time.Second)
			if i == 30 {
				pprof.StopCPUProfile()
				cf.Close()
			}
			runtime.GC()
			f, _ := os.Create(p)
			pprof.WriteHeapProfile(f)
			f.Close()
		}
	}()
}
