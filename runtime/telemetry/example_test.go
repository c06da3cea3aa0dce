package telemetry_test

import (
	"context"
	"fmt"
	"os"

	"github.com/aidgen/aid/runtime/telemetry"
)

// A service builds its provider from its environment once at start-up and
// flushes it on the way out. With no OTEL_* exporter or endpoint set, as
// here, tracing is off and costs nothing.
func ExampleTracerProvider() {
	ctx := context.Background()
	env := map[string]string{"OTEL_SERVICE_NAME": "orders"} // a service passes os.LookupEnv
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }

	tp, shutdown, err := telemetry.TracerProvider(ctx, lookup, "orders", "1.0.0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	defer func() {
		if err := shutdown(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()

	_, span := tp.Tracer("orders").Start(ctx, "handle")
	defer span.End()
	fmt.Println("recording:", span.IsRecording())
	// Output: recording: false
}
