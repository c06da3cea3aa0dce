package kind_test

import (
	"strings"
	"testing"
	"time"

	"github.com/aidgen/aid/runtime/kind"
)

func TestParseWindow(t *testing.T) {
	tests := []struct {
		window, zone string
		every        time.Duration
		calendar     string
		err          string // a part of the error; "" for none
	}{
		{window: "", every: 0},
		{window: "30s", every: 30 * time.Second},
		{window: "1h30m", every: 90 * time.Minute},
		{window: "7d", every: 7 * 24 * time.Hour},
		{window: "2w", every: 14 * 24 * time.Hour},
		{window: "1y", every: 365 * 24 * time.Hour},
		{window: "day", calendar: "day"},
		{window: "month", zone: "Europe/Berlin", calendar: "month"},
		{window: "29s", err: "outside 30s to 365d"},
		{window: "366d", err: "outside 30s to 365d"},
		{window: "2y", err: "outside 30s to 365d"},
		{window: "90500ms", err: "whole number of seconds"},
		{window: "weekly", err: `neither "day", "month" nor a length`},
		{window: "0d", err: "neither"},
		{window: "-1h", err: "outside"},
		{window: "day", zone: "Mars/Olympus", err: `unknown time zone "Mars/Olympus"`},
		{window: "day", zone: "Local", err: "depends on the machine"},
		{window: "1h", zone: "Europe/Berlin", err: "takes no time zone"},
		{window: "", zone: "UTC", err: "without a window"},
	}
	for _, tt := range tests {
		t.Run(tt.window+"/"+tt.zone, func(t *testing.T) {
			w, err := kind.ParseWindow(tt.window, tt.zone)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("ParseWindow: %v, want an error containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if w.Every != tt.every || w.Calendar != tt.calendar {
				t.Errorf("got %+v", w)
			}
		})
	}
}

func TestWindowBounds(t *testing.T) {
	utc := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		name, window, zone, at, start, end string
	}{
		{"fixed hour", "1h", "", "2026-12-02T08:59:59Z", "2026-12-02T08:00:00Z", "2026-12-02T09:00:00Z"},
		{"fixed on the boundary", "30s", "", "2026-12-02T08:00:30Z", "2026-12-02T08:00:30Z", "2026-12-02T08:01:00Z"},
		{"before the epoch", "1h", "", "1969-12-31T23:30:00Z", "1969-12-31T23:00:00Z", "1970-01-01T00:00:00Z"},
		{"day in utc", "day", "", "2026-12-02T23:59:59Z", "2026-12-02T00:00:00Z", "2026-12-03T00:00:00Z"},
		{"day in berlin is another utc day", "day", "Europe/Berlin", "2026-12-02T23:30:00Z", "2026-12-02T23:00:00Z", "2026-12-03T23:00:00Z"},
		{"the day clocks go forward is 23 hours", "day", "Europe/Berlin", "2026-03-29T12:00:00Z", "2026-03-28T23:00:00Z", "2026-03-29T22:00:00Z"},
		{"month in berlin", "month", "Europe/Berlin", "2026-03-31T22:30:00Z", "2026-03-31T22:00:00Z", "2026-04-30T22:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := kind.ParseWindow(tt.window, tt.zone)
			if err != nil {
				t.Fatal(err)
			}
			start, end := w.Bounds(utc(tt.at))
			if !start.Equal(utc(tt.start)) || !end.Equal(utc(tt.end)) {
				t.Errorf("Bounds(%s) = %s, %s; want %s, %s", tt.at, start.UTC().Format(time.RFC3339), end.UTC().Format(time.RFC3339), tt.start, tt.end)
			}
		})
	}
}
