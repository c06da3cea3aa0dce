package ir_test

import (
	"fmt"

	"github.com/aidgen/aid/ir"
)

func ExampleLoadBytes() {
	src := []byte(`
name:    "hello"
version: "0.1.0"
providers: fake: kind: "fake"
models: "fake-2024-01-01": {provider: "fake", contextWindow: 4096, maxOutputTokens: 256, cost: inputPer1kUSD: 0}
aliases: small: "fake-2024-01-01"
agents: greeter: {model: "small", instructions: "Greet the user."}
`)
	doc, err := ir.LoadBytes("app.cue", src)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, a := range doc.Agents {
		m, _ := doc.Resolve(a.Model)
		fmt.Printf("%s runs on %s (%s) for at most %d steps\n", a.Name, a.Model, m.ID, a.MaxSteps)
	}
	// Output:
	// greeter runs on small (fake-2024-01-01) for at most 8 steps
}

func ExampleLoadBytes_errors() {
	src := []byte(`name: "hello"
version: "0.1.0"
providers: fake: kind: "fake"
models: "fake-2024-01-01": {provider: "fake", contextWindow: 4096, maxOutputTokens: 256, cost: inputPer1kUSD: 0}
aliases: small: "fake-2024-01-01"
agents: greeter: {model: "smal", instructions: "Greet the user.", maxSteps: 0}
`)
	_, err := ir.LoadBytes("app.cue", src)
	if es, ok := ir.IsInvalid(err); ok {
		for _, e := range es {
			fmt.Println(e)
		}
	}
	// Output:
	// app.cue:6:26: agents.greeter.model: unknown alias "smal" (did you mean "small"?); known aliases: small
	// app.cue:6:77: agents.greeter.maxSteps: invalid value 0: want a number at least 1
}
