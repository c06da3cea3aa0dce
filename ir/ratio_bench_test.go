//go:build unix

package ir_test

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"

	"github.com/aidgen/aid/ir"
)

// cpuTime is the CPU time the process has used, user and system, garbage
// collection included.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkStageRatios measures, interleaved in one run, the least CPU
// time of each stage of loading the 200-agent/500-tool IR (CUEFloor's
// work, Load's CUE stage, ir's own passes), and reports the ratios the
// targets are stated in: unify/floor and passes/unify. CPU time of the
// fastest round is steadier than wall time on a shared machine, where the
// other benchmarks' ns/op vary by a factor of two between runs.
func BenchmarkStageRatios(b *testing.B) {
	src := largeIR(200, 500)
	check, err := ir.CheckStage(filepath.Join(b.TempDir(), "app.cue"), []byte(src))
	if err != nil {
		b.Fatal(err)
	}
	stages := []func(){
		func() { // CUEFloor
			v := cuecontext.New().CompileString(src, cue.Filename("app.cue"))
			if err := v.Validate(cue.Concrete(true)); err != nil {
				b.Fatal(err)
			}
		},
		func() { // UnifyFloor
			if err := ir.UnifyStage("app.cue", []byte(src)); err != nil {
				b.Fatal(err)
			}
		},
		func() { // IRPasses
			if _, err := check(); err != nil {
				b.Fatal(err)
			}
		},
	}
	best := []time.Duration{time.Hour, time.Hour, time.Hour}
	for b.Loop() {
		for i, run := range stages {
			start := cpuTime(b)
			run()
			best[i] = min(best[i], cpuTime(b)-start)
		}
	}
	b.ReportMetric(float64(best[0])/1e6, "floor-cpu-ms")
	b.ReportMetric(float64(best[1])/1e6, "unify-cpu-ms")
	b.ReportMetric(float64(best[2])/1e6, "passes-cpu-ms")
	b.ReportMetric(float64(best[1])/float64(best[0]), "unify/floor")
	b.ReportMetric(float64(best[2])/float64(best[1]), "passes/unify")
}
