package agents_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/aidgen/aid/runtime/agents"
)

// A fixture tool answers from argument → result rows, whatever the key
// order or white space of the call; a call no row matches is an error the
// model reads, naming the nearest row.
func ExampleFixtureTool() {
	rows, err := agents.ParseFixture("orders.jsonl", []byte(`{"args": {"order_id": "AB-123456"}, "result": {"status": "delivered"}}
{"args": {"order_id": "AB-654321"}, "result": "in transit"}
`))
	if err != nil {
		log.Fatal(err)
	}
	orders, err := agents.FixtureTool(rows)
	if err != nil {
		log.Fatal(err)
	}
	for _, args := range []string{`{ "order_id" : "AB-123456" }`, `{"order_id": "AB-654321"}`, `{"order_id": "AB-65432"}`} {
		out, err := orders.Call(context.Background(), json.RawMessage(args))
		fmt.Println(out, err)
	}
	// Output:
	// {"status":"delivered"} <nil>
	// in transit <nil>
	//  no fixture row has the arguments {"order_id":"AB-65432"}; the nearest is row 2 (orders.jsonl:2) with {"order_id":"AB-654321"} (differs in order_id)
}
