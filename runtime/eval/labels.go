package eval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// LabelledAnswer is one item of a judge's calibration set: an answer people judged.
type LabelledAnswer struct {
	// ID names the item in messages; empty means its position.
	ID string `json:"id,omitempty"`
	// Input is what the system was asked.
	Input string `json:"input"`
	// Expected is the reference answer the judge is shown, if any.
	Expected string `json:"expected,omitempty"`
	// Answer is the answer people judged.
	Answer string `json:"answer"`
	// Pass is the people's verdict.
	Pass *bool `json:"pass"`
}

// ReadLabels reads a calibration set: a JSON array of [LabelledAnswer], or JSON Lines
// (a file ending in .jsonl), each with an answer and a pass verdict.
func ReadLabels(path string) ([]LabelledAnswer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read judge labels: %w", err)
	}
	var items []LabelledAnswer
	decode := func(where string, b []byte, dst any) error {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(dst); err != nil {
			return fmt.Errorf("%s: %s: %w", path, where, err)
		}
		return nil
	}
	if strings.EqualFold(filepath.Ext(path), ".jsonl") {
		for i, line := range bytes.Split(data, []byte("\n")) {
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			var it LabelledAnswer
			if err := decode(fmt.Sprintf("line %d", i+1), line, &it); err != nil {
				return nil, err
			}
			if it.ID == "" {
				it.ID = fmt.Sprintf("line %d", i+1)
			}
			items = append(items, it)
		}
	} else {
		if err := decode("the file", data, &items); err != nil {
			return nil, err
		}
		for i := range items {
			if items[i].ID == "" {
				items[i].ID = fmt.Sprintf("item %d", i+1)
			}
		}
	}
	var errs []error
	for _, it := range items {
		if it.Pass == nil {
			errs = append(errs, fmt.Errorf("%s: %s has no \"pass\": label it true or false", path, it.ID))
		}
		if strings.TrimSpace(it.Answer) == "" {
			errs = append(errs, fmt.Errorf("%s: %s has no \"answer\" to judge", path, it.ID))
		}
	}
	if len(items) == 0 {
		errs = append(errs, fmt.Errorf("%s: no labelled answers", path))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return items, nil
}

// MeasureJudge asks the judge about every labelled answer, at most concurrency at a
// time, and measures its agreement with the labels ([CalibrateJudge]). A judge that fails
// on an item fails the measurement, naming the item: a calibration with holes would
// measure a different judge.
func MeasureJudge(ctx context.Context, j *LLMJudge, items []LabelledAnswer, concurrency int) (JudgeCalibration, error) {
	if j == nil {
		return JudgeCalibration{}, errors.New("judge calibration: no judge")
	}
	concurrency = max(1, concurrency)
	scores := make([]float64, len(items))
	errs := make([]error, len(items))
	sem := make(chan struct{}, concurrency)
	var wg sync.WaitGroup
	for i, it := range items {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return JudgeCalibration{}, context.Cause(ctx)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			scores[i], errs[i] = j.Score(ctx, Case{ID: it.ID, Input: it.Input, Expected: it.Expected}, it.Answer)
		}()
	}
	wg.Wait()
	human := make([]bool, len(items))
	for i, it := range items {
		if errs[i] != nil {
			return JudgeCalibration{}, fmt.Errorf("judge calibration: %s: %w", it.ID, errs[i])
		}
		human[i] = *it.Pass
	}
	return CalibrateJudge(human, scores)
}
