package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"golang.org/x/term"
)

// progress shows how far an eval is: a redrawn bar on a terminal, a plain
// line per tenth otherwise (CI logs), or nothing.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	mode  string // "bar", "lines" or "none"
	name  string
	total int
	unit  string // what is counted in lines mode; empty means samples
	last  int    // the last tenth printed in lines mode
	drawn bool
}

func newProgress(w io.Writer, mode, name string, total int) *progress {
	if mode == "auto" {
		mode = "lines"
		if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			mode = "bar"
		}
	}
	return &progress{w: w, mode: mode, name: name, total: total, last: -1}
}

// update is the eval.Options.Progress callback.
func (p *progress) update(done, total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if total > 0 {
		p.total = total
	}
	switch p.mode {
	case "bar":
		const width = 30
		filled := 0
		if p.total > 0 {
			filled = done * width / p.total
		}
		fmt.Fprintf(p.w, "\r%s [%s%s] %d/%d", p.name, strings.Repeat("#", filled), strings.Repeat(".", width-filled), done, p.total)
		p.drawn = true
	case "lines":
		if p.total == 0 {
			return
		}
		tenth := done * 10 / p.total
		if tenth > p.last {
			p.last = tenth
			unit := p.unit
			if unit == "" {
				unit = "samples"
			}
			fmt.Fprintf(p.w, "%s: %d/%d %s\n", p.name, done, p.total, unit)
		}
	}
}

// done ends the bar's line.
func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
}
