package agents

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"sync"
	"unicode/utf8"
)

// encodeCheckpoint returns cp as JSON, byte for byte what encoding/json's
// Marshal writes (TestCheckpointEncodingIsJSONs holds it to that with every
// field of every type it writes set, and FuzzCheckpointStrings with any
// string), in a fraction of its time: a checkpoint is encoded whenever a run
// ends in the memory store and on every step in PostgreSQL, and its bulk,
// the messages and the steps, is a few small types that reflection made the
// costliest part of a 20-step run (BenchmarkStep, BenchmarkEncodeCheckpoint).
// What a run rarely holds (a pause, grants, verdicts, compactions, a
// delegation's record, reasoning items) is left to encoding/json, as is a
// checkpoint that holds a float it cannot encode, so that the error is
// encoding/json's.
func encodeCheckpoint(cp *Checkpoint) ([]byte, error) {
	var e cpEncoder
	scratch := cpScratch.Get().(*[]byte)
	b := e.checkpoint((*scratch)[:0], cp)
	var out []byte
	if e.err == nil {
		out = bytes.Clone(b)
	}
	if cap(b) <= maxScratch {
		*scratch = b
		cpScratch.Put(scratch)
	}
	if e.err != nil {
		c := *cp // a copy, so that cp does not escape on the common path
		return json.Marshal(&c)
	}
	return out, nil
}

// cpScratch holds the buffers checkpoints are written in, whose result is
// then copied at its size: stored runs hold no spare capacity. A buffer
// grown past maxScratch by a long run is let go rather than kept.
var cpScratch = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

const maxScratch = 1 << 20

// cpEncoder's methods append JSON to the slice they are given and return
// it; err is the first value it could not encode.
type cpEncoder struct {
	err error
}

func (e *cpEncoder) checkpoint(b []byte, cp *Checkpoint) []byte {
	b = append(b, `{"version":`...)
	b = strconv.AppendInt(b, int64(cp.Version), 10)
	b = e.key(b, `run_id`)
	b = e.str(b, cp.RunID)
	b = e.key(b, `agent`)
	b = e.str(b, cp.Agent)
	b = e.key(b, `path`)
	if cp.Path == nil {
		b = append(b, "null"...)
	} else {
		b = e.strs(b, cp.Path)
	}
	b = e.key(b, `alias`)
	b = e.str(b, cp.Alias)
	b = e.optBool(b, `degraded`, cp.Degraded)
	b = e.optStr(b, `thread_id`, cp.ThreadID)
	b = e.optStr(b, `user_id`, cp.UserID)
	b = e.optStr(b, `key`, cp.Key)
	b = e.optStr(b, `tenant`, cp.Tenant)
	b = e.key(b, `messages`)
	b = e.messages(b, cp.Messages, true)
	b = e.optInt(b, `turn`, int64(cp.Turn))
	b = e.key(b, `steps`)
	if cp.Steps == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range cp.Steps {
			if i > 0 {
				b = append(b, ',')
			}
			b = e.step(b, &cp.Steps[i])
		}
		b = append(b, ']')
	}
	b = e.key(b, `agent_steps`)
	b = strconv.AppendInt(b, int64(cp.AgentSteps), 10)
	b = e.optInt(b, `step_limit`, int64(cp.StepLimit))
	b = e.optInt(b, `delegations`, int64(cp.Delegations))
	b = e.optBool(b, `repaired`, cp.Repaired)
	b = e.key(b, `usage`)
	b = e.usage(b, &cp.Usage)
	b = e.key(b, `cost_usd`)
	b = e.float(b, cp.CostUSD)
	b = e.optValue(b, `pending`, cp.Pending != nil, cp.Pending)
	if len(cp.Continuations) > 0 {
		b = e.key(b, `continuations`)
		b = e.value(b, cp.Continuations)
	}
	b = e.optValue(b, `client`, cp.Client != nil, cp.Client)
	b = e.optValue(b, `cancel`, cp.Cancel != nil, cp.Cancel)
	b = e.optStr(b, `app`, cp.App)
	b = e.optStr(b, `app_version`, cp.AppVersion)
	if len(cp.Grants) > 0 {
		b = e.key(b, `grants`)
		b = e.value(b, cp.Grants)
	}
	if len(cp.Verdicts) > 0 {
		b = e.key(b, `verdicts`)
		b = e.value(b, cp.Verdicts)
	}
	b = e.optValue(b, `compacted`, cp.Compacted != nil, cp.Compacted)
	b = e.optBool(b, `input_checked`, cp.InputChecked)
	b = append(b, '}')
	return b
}

// messages writes ms; a nil slice is null where the field has no
// omitempty (whole), as encoding/json writes it.
func (e *cpEncoder) messages(b []byte, ms []SavedMessage, whole bool) []byte {
	if ms == nil && whole {
		b = append(b, "null"...)
		return b
	}
	b = append(b, '[')
	for i := range ms {
		if i > 0 {
			b = append(b, ',')
		}
		m := &ms[i]
		b = append(b, `{"role":`...)
		b = e.str(b, string(m.Role))
		b = e.optStr(b, `content`, m.Content)
		if len(m.ToolCalls) > 0 {
			b = e.key(b, `tool_calls`)
			b = append(b, '[')
			for j := range m.ToolCalls {
				if j > 0 {
					b = append(b, ',')
				}
				c := &m.ToolCalls[j]
				b = append(e.call(b, c.ID, c.Name, c.Arguments), '}')
			}
			b = append(b, ']')
		}
		b = e.optStr(b, `tool_call_id`, m.ToolCallID)
		b = e.optStr(b, `name`, m.Name)
		b = e.optBool(b, `failed`, m.Failed)
		if len(m.Reasoning) > 0 {
			b = e.key(b, `reasoning`)
			b = e.value(b, m.Reasoning)
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	return b
}

func (e *cpEncoder) step(b []byte, s *StepRecord) []byte {
	b = append(b, `{"number":`...)
	b = strconv.AppendInt(b, int64(s.Number), 10)
	b = e.key(b, `agent`)
	b = e.str(b, s.Agent)
	b = e.key(b, `alias`)
	b = e.str(b, s.Alias)
	b = e.key(b, `requested`)
	b = e.str(b, s.Requested)
	b = e.key(b, `model`)
	b = e.str(b, s.Model)
	b = e.optStr(b, `degraded_from`, s.DegradedFrom)
	b = e.optStr(b, `text`, s.Text)
	if r := s.Request; r != nil {
		b = e.key(b, `request`)
		b = append(b, '{')
		n := len(b)
		b = e.optInt(b, `keep`, int64(r.Keep))
		b = e.optBool(b, `answered`, r.Answered)
		if len(r.Messages) > 0 {
			b = e.key(b, `messages`)
			b = e.messages(b, r.Messages, false)
		}
		b = e.optBool(b, `memory`, r.Memory)
		if len(r.Tools) > 0 {
			b = e.strs(e.key(b, `tools`), r.Tools)
		}
		b = e.optStr(b, `fingerprint`, r.Fingerprint)
		if len(r.Learned) > 0 {
			b = e.key(b, `learned`)
			b = e.value(b, r.Learned)
		}
		if len(b) > n {
			// key wrote a comma before the first field.
			copy(b[n:], b[n+1:])
			b = b[:len(b)-1]
		}
		b = append(b, '}')
	}
	b = e.key(b, `usage`)
	b = e.usage(b, &s.Usage)
	b = e.key(b, `cost_usd`)
	b = e.float(b, s.CostUSD)
	if len(s.ToolCalls) > 0 {
		b = e.key(b, `tool_calls`)
		b = append(b, '[')
		for i := range s.ToolCalls {
			if i > 0 {
				b = append(b, ',')
			}
			c := &s.ToolCalls[i]
			b = e.call(b, c.ID, c.Name, c.Arguments)
			b = e.optBool(b, `done`, c.Done)
			b = e.optBool(b, `interrupted`, c.Interrupted)
			b = e.optStr(b, `observation`, c.Observation)
			b = e.optStr(b, `error_kind`, string(c.ErrorKind))
			b = e.optValue(b, `policy`, c.Policy != nil, c.Policy)
			b = e.optValue(b, `approval`, c.Approval != nil, c.Approval)
			b = e.optValue(b, `delegate`, c.Delegate != nil, c.Delegate)
			b = e.optBool(b, `client`, c.Client)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = e.optBool(b, `truncated`, s.Truncated)
	b = append(b, '}')
	return b
}

// call opens a tool call's object with the fields a saved call and a call
// record share.
func (e *cpEncoder) call(b []byte, id, name, args string) []byte {
	b = append(b, `{"id":`...)
	b = e.str(b, id)
	b = e.key(b, `name`)
	b = e.str(b, name)
	b = e.key(b, `arguments`)
	return e.str(b, args)
}

func (e *cpEncoder) usage(b []byte, u *UsageRecord) []byte {
	b = append(b, `{"input_tokens":`...)
	b = strconv.AppendInt(b, u.InputTokens, 10)
	b = e.optInt(b, `cache_read_tokens`, u.CacheReadTokens)
	b = e.optInt(b, `cache_write_5m_tokens`, u.CacheWrite5mTokens)
	b = e.optInt(b, `cache_write_1h_tokens`, u.CacheWrite1hTokens)
	b = e.key(b, `output_tokens`)
	b = strconv.AppendInt(b, u.OutputTokens, 10)
	b = e.key(b, `total_tokens`)
	b = strconv.AppendInt(b, u.TotalTokens, 10)
	b = append(b, '}')
	return b
}

// strs writes ss as an array of strings.
func (e *cpEncoder) strs(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = e.str(b, s)
	}
	return append(b, ']')
}

// key writes a comma and a field's name (names here need no escaping).
func (e *cpEncoder) key(b []byte, name string) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return b
}

func (e *cpEncoder) optStr(b []byte, name, s string) []byte {
	if s != "" {
		b = e.key(b, name)
		b = e.str(b, s)
	}
	return b
}

func (e *cpEncoder) optBool(b []byte, name string, v bool) []byte {
	if v {
		b = e.key(b, name)
		b = append(b, "true"...)
	}
	return b
}

func (e *cpEncoder) optInt(b []byte, name string, v int64) []byte {
	if v != 0 {
		b = e.key(b, name)
		b = strconv.AppendInt(b, v, 10)
	}
	return b
}

// float writes f as encoding/json does: the shortest representation, in
// exponent form below 1e-6 and from 1e21, with a one-digit negative
// exponent; NaN and infinities are an error, as there.
func (e *cpEncoder) float(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		e.fail(&json.UnsupportedValueError{Str: strconv.FormatFloat(f, 'g', -1, 64)})
		return b
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// optValue writes v when set, as value does; v is a pointer, which costs
// nothing to pass when it is not set.
func (e *cpEncoder) optValue(b []byte, name string, set bool, v any) []byte {
	if !set {
		return b
	}
	return e.value(e.key(b, name), v)
}

// value leaves v to encoding/json.
func (e *cpEncoder) value(b []byte, v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		e.fail(err)
		return b
	}
	b = append(b, data...)
	return b
}

func (e *cpEncoder) fail(err error) {
	if e.err == nil {
		e.err = err
	}
}

const hexDigits = "0123456789abcdef"

// str writes s quoted as encoding/json does by default: HTML's <, > and &
// escaped, invalid UTF-8 as U+FFFD, and U+2028 and U+2029 escaped.
func (e *cpEncoder) str(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	b = append(b, '"')
	return b
}
