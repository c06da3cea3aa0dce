package agents

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/aidgen/aid/runtime/gateway"
)

// capturing answers as stubModel does and keeps every request's messages.
type capturing struct {
	stubModel
	reqs [][]gateway.Message
}

func (c *capturing) Generate(ctx context.Context, alias string, req gateway.Request, opts ...gateway.CallOption) (gateway.Result, error) {
	c.reqs = append(c.reqs, append([]gateway.Message(nil), req.Messages...))
	res, err := c.stubModel.Generate(ctx, alias, req, opts...)
	if len(c.reqs) == 2 {
		// A call the tool refuses: its tool message is a failed one.
		res.ToolCalls = []gateway.ToolCall{{ID: "bad", Name: "lookup", Arguments: json.RawMessage(`{"id":7}`)}, {ID: "c2", Name: "lookup", Arguments: json.RawMessage(`{"id":"B"}`)}}
	}
	return res, err
}

// TestRequestRecordsRebuild: the request records of a run's steps, which
// say they follow the step before's answer rather than repeat it, rebuild
// every request the model was sent, through a checkpoint's encoding.
func TestRequestRecordsRebuild(t *testing.T) {
	r := benchRuntime(t)
	m := &capturing{stubModel: stubModel{steps: 4}}
	r.gen = m
	res, err := r.Run(context.Background(), "a", "where is order A-1?", RunOptions{})
	if err != nil || len(res.Steps) != 4 {
		t.Fatalf("%d steps: %v", len(res.Steps), err)
	}
	for i, s := range res.Steps[1:] {
		if !s.Request.Answered || s.Request.Keep != 0 || len(s.Request.Messages) != 0 {
			t.Errorf("step %d's request record repeats what it follows: %+v", i+2, s.Request)
		}
	}
	rec, err := r.store.LoadRun(context.Background(), res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	data, err := MarshalCheckpoint(rec.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := UnmarshalCheckpoint(data)
	if err != nil {
		t.Fatal(err)
	}
	full, err := requests(cp.Steps)
	if err != nil {
		t.Fatal(err)
	}
	for i, sent := range m.reqs {
		want := make([]SavedMessage, len(sent))
		for j, msg := range sent {
			want[j] = withoutObservation(saveMessage(msg))
		}
		if !reflect.DeepEqual(full[i].Messages, want) {
			t.Errorf("step %d: rebuilt\n%+v\nsent\n%+v", i+1, full[i].Messages, want)
		}
	}
}
