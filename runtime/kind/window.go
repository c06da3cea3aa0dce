package kind

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The bounds of a fixed-length window. They live here, with the parser,
// because the IR checks a declared window with ParseWindow and the gateway
// builds its budgets with it: one rule, read by both.
const (
	// MinWindow is the shortest fixed window: shorter ones reset faster
	// than a ledger round trip is worth.
	MinWindow = 30 * time.Second
	// MaxWindow is the longest fixed window, 365 days; a longer cap is a
	// budget without a window.
	MaxWindow = 365 * 24 * time.Hour
)

// Calendar windows.
const (
	// WindowDay resets at midnight in the window's time zone.
	WindowDay = "day"
	// WindowMonth resets at midnight on the first of the month in the
	// window's time zone.
	WindowMonth = "month"
)

// Window is a reset window of a budget: spend counts from the start of the
// window that holds the call's time and starts from zero in the next one.
// The zero Window never resets.
type Window struct {
	// Every is the length of a fixed window; zero for a calendar one.
	Every time.Duration
	// Calendar is WindowDay or WindowMonth; empty for a fixed window.
	Calendar string
	// Location is the time zone of a calendar window.
	Location *time.Location
}

// ParseWindow reads a window as an app declares it: a fixed length (Go's
// duration syntax, or a whole number of days "7d", weeks "2w" or years
// "1y", a year being 365 days) from MinWindow to MaxWindow in whole
// seconds, or "day" or "month" in the IANA time zone timeZone (UTC when
// empty). A fixed window takes no time zone: it is aligned on the Unix
// epoch, the same everywhere. An empty window is the zero Window.
func ParseWindow(window, timeZone string) (Window, error) {
	switch window {
	case "":
		if timeZone != "" {
			return Window{}, fmt.Errorf("time zone %q given without a window; set window to \"day\" or \"month\"", timeZone)
		}
		return Window{}, nil
	case WindowDay, WindowMonth:
		loc, err := LoadTimeZone(timeZone)
		if err != nil {
			return Window{}, err
		}
		return Window{Calendar: window, Location: loc}, nil
	}
	d, err := parseLength(window)
	if err != nil {
		return Window{}, err
	}
	if timeZone != "" {
		return Window{}, fmt.Errorf("window %q has a fixed length, aligned on the Unix epoch, and takes no time zone; use \"day\" or \"month\" for a window in %q", window, timeZone)
	}
	return Window{Every: d}, nil
}

// LoadTimeZone returns the IANA time zone name, UTC for "". It refuses
// "Local", whose meaning would depend on the machine.
func LoadTimeZone(name string) (*time.Location, error) {
	if name == "" || name == "UTC" {
		return time.UTC, nil
	}
	if name == "Local" {
		return nil, errors.New(`time zone "Local" depends on the machine; name an IANA zone such as "Europe/Berlin"`)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q; name an IANA zone such as \"Europe/Berlin\" or \"UTC\"", name)
	}
	return loc, nil
}

func parseLength(s string) (time.Duration, error) {
	bad := fmt.Errorf("window %q is neither \"day\", \"month\" nor a length such as \"30s\", \"1h\", \"7d\" or \"1y\"", s)
	var d time.Duration
	if n, unit := strings.TrimRight(s, "dwy"), s[len(strings.TrimRight(s, "dwy")):]; len(unit) == 1 {
		v, err := strconv.ParseInt(n, 10, 64)
		if err != nil || v <= 0 || v > 10_000 {
			return 0, bad
		}
		day := 24 * time.Hour
		d = time.Duration(v) * map[string]time.Duration{"d": day, "w": 7 * day, "y": 365 * day}[unit]
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, bad
		}
	}
	switch {
	case d < MinWindow || d > MaxWindow:
		return 0, fmt.Errorf("window %q is outside %s to 365d", s, MinWindow)
	case d%time.Second != 0:
		return 0, fmt.Errorf("window %q is not a whole number of seconds", s)
	}
	return d, nil
}

// IsZero reports whether w never resets.
func (w Window) IsZero() bool { return w.Every == 0 && w.Calendar == "" }

// Bounds returns the start and end of the window that holds t. Fixed
// windows are aligned on the Unix epoch; calendar ones on midnight in the
// window's time zone, so that a day is 23 or 25 hours long across a
// daylight-saving change. The zero Window returns zero times.
func (w Window) Bounds(t time.Time) (start, end time.Time) {
	switch {
	case w.Every > 0:
		secs := int64(w.Every / time.Second)
		u := t.Unix()
		u -= ((u % secs) + secs) % secs
		start = time.Unix(u, 0).UTC()
		return start, start.Add(w.Every)
	case w.Calendar == WindowDay:
		y, m, d := t.In(w.Location).Date()
		start = time.Date(y, m, d, 0, 0, 0, 0, w.Location)
		return start, start.AddDate(0, 0, 1)
	case w.Calendar == WindowMonth:
		y, m, _ := t.In(w.Location).Date()
		start = time.Date(y, m, 1, 0, 0, 0, 0, w.Location)
		return start, start.AddDate(0, 1, 0)
	}
	return time.Time{}, time.Time{}
}

// String returns the window as ParseWindow reads it, with its time zone.
func (w Window) String() string {
	switch {
	case w.Every > 0:
		return w.Every.String()
	case w.Calendar != "":
		return w.Calendar + " in " + w.Location.String()
	}
	return "none"
}
