package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/internal/jsonschemas"
)

// Attributes an MCP call adds to its execute_tool span, besides the
// semantic conventions' mcp.method.name, mcp.session.id,
// mcp.protocol.version and network.transport.
var (
	// AttrServer is the server's name in mcpServers.
	AttrServer = attribute.Key("aid.mcp.server")
	// AttrTransport is the server's transport, "stdio" or "http".
	AttrTransport = attribute.Key("aid.mcp.transport")
	// AttrTool is the server's name for the tool, which may differ from
	// the name the model calls (gen_ai.tool.name).
	AttrTool = attribute.Key("aid.mcp.tool")
)

// remoteTool is the implementation of one server tool.
type remoteTool struct {
	conn   *conn
	name   string          // the server's name for the tool
	schema json.RawMessage // its input schema at start-up, which the model was shown
}

// ToolError is the observation of a call the server answered with
// isError: the tool's own report of its failure, which the model reads.
type ToolError struct {
	// Server is the server's name in mcpServers, Tool the server's name for
	// the tool.
	Server, Tool string
	// Message is the result's content, described as for a success.
	Message string
}

func (e *ToolError) Error() string { return e.Message }

// Call implements agents.Implementation: tools/call with the arguments
// (which the runtime validated against the schema the server gave at
// start-up), its result's content as the observation. ctx's end, the
// tool's timeout, cancels the call with the protocol's
// notifications/cancelled; a connection that drops fails the call, and the
// next call reconnects.
func (t *remoteTool) Call(ctx context.Context, args json.RawMessage) (string, error) {
	obs, err := t.call(ctx, args)
	return t.conn.redact(obs), t.conn.redactErr(err)
}

// call is Call before what the server said is redacted.
func (t *remoteTool) call(ctx context.Context, args json.RawMessage) (string, error) {
	c := t.conn
	span := trace.SpanFromContext(ctx)
	if span.IsRecording() {
		nt := semconv.NetworkTransportPipe
		if c.transport == TransportHTTP {
			nt = semconv.NetworkTransportTCP
		}
		span.SetAttributes(AttrServer.String(c.name), AttrTransport.String(c.transport), AttrTool.String(t.name),
			semconv.McpMethodNameToolsCall, nt)
	}
	sess, err := c.session(ctx)
	if err != nil {
		return "", err
	}
	if span.IsRecording() {
		if id := sess.ID(); id != "" {
			span.SetAttributes(semconv.McpSessionID(id))
		}
		if r := sess.InitializeResult(); r != nil {
			span.SetAttributes(semconv.McpProtocolVersion(r.ProtocolVersion))
		}
	}
	current, err := c.tool(ctx, sess, t.name)
	if err != nil {
		return "", err
	}
	if now := schemaOf(current); !bytes.Equal(now, t.schema) {
		// The server changed the tool since the model was shown it.
		if err := validate(now, args); err != nil {
			return "", fmt.Errorf("MCP server %q changed the input schema of %s since start-up, and these arguments do not fit it: %w", c.name, t.name, err)
		}
	}
	params := &sdk.CallToolParams{Name: t.name, Arguments: args}
	token := c.newToken()
	params.SetProgressToken(token)
	// A notification the SDK handles as the call returns must not reach
	// the run after it: the run has moved on (ReportProgress's contract).
	var progressMu sync.Mutex
	returned := false
	c.progress.Store(token, func(p agents.ToolProgress) {
		progressMu.Lock()
		defer progressMu.Unlock()
		if !returned {
			agents.ReportProgress(ctx, p)
		}
	})
	defer func() {
		c.progress.Delete(token)
		progressMu.Lock()
		returned = true
		progressMu.Unlock()
	}()
	res, err := sess.CallTool(ctx, params)
	if err != nil {
		return "", t.failed(ctx, sess, err)
	}
	c.succeeded()
	obs := Observation(res)
	if res.IsError {
		return "", &ToolError{Server: c.name, Tool: t.name, Message: c.redact(obs)}
	}
	return obs, nil
}

// validate checks args against the JSON Schema schema.
func validate(schema, args json.RawMessage) error {
	s, err := jsonschemas.Compile("urn:aid:mcp:tool", schema)
	if err != nil {
		return err
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return fmt.Errorf("the arguments are not JSON: %w", err)
	}
	return s.Validate(v)
}

// Observation is what the model reads of a tool's result: its structured
// content as JSON when it has some; otherwise its text content, each piece
// on its own line, with images, audio and resources described (type,
// size, URI) rather than inlined, since the model reads text.
func Observation(res *sdk.CallToolResult) string {
	if res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			return string(b)
		}
	}
	parts := make([]string, 0, len(res.Content))
	for _, c := range res.Content {
		parts = append(parts, describeContent(c))
	}
	return strings.Join(parts, "\n")
}

// describeContent is one piece of content as the model reads it.
func describeContent(c sdk.Content) string {
	switch c := c.(type) {
	case *sdk.TextContent:
		return c.Text
	case *sdk.ImageContent:
		return fmt.Sprintf("[image: %s, %d bytes, not shown]", mimeOr(c.MIMEType), len(c.Data))
	case *sdk.AudioContent:
		return fmt.Sprintf("[audio: %s, %d bytes, not played]", mimeOr(c.MIMEType), len(c.Data))
	case *sdk.ResourceLink:
		var b strings.Builder
		fmt.Fprintf(&b, "[resource link: %s", c.URI)
		if c.Name != "" {
			fmt.Fprintf(&b, " %q", c.Name)
		}
		if c.MIMEType != "" {
			fmt.Fprintf(&b, ", %s", c.MIMEType)
		}
		if c.Description != "" {
			fmt.Fprintf(&b, ": %s", c.Description)
		}
		b.WriteString("]")
		return b.String()
	case *sdk.EmbeddedResource:
		r := c.Resource
		if r == nil {
			return "[resource: empty]"
		}
		size := len(r.Blob)
		what := "bytes"
		if r.Blob == nil {
			size, what = len(r.Text), "characters of text"
		}
		return fmt.Sprintf("[resource: %s, %s, %d %s, not shown]", r.URI, mimeOr(r.MIMEType), size, what)
	case nil:
		return ""
	}
	return fmt.Sprintf("[%T content, not shown]", c)
}

func mimeOr(m string) string {
	if m == "" {
		return "of unknown type"
	}
	return m
}

// codeRejected is the JSON-RPC code with which the SDK's streamable HTTP
// client reports a request that did not reach the server, or whose
// answer's stream broke (jsonrpc2.ErrRejected, which the SDK does not
// export).
const codeRejected = -32005

// failed is the error of a call that got no result. The end of ctx is
// itself. An error the server answered leaves the session as it is, and
// is a *NotOfferedError when the server no longer offers the tool (it may
// refuse the call before its notification that its tools changed
// arrives). Anything else (the connection closed, a message too large, an
// unreadable answer) leaves the session in doubt: it is dropped, and the
// next call reconnects.
func (t *remoteTool) failed(ctx context.Context, sess *sdk.ClientSession, err error) error {
	c := t.conn
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if ae := authError(err); ae != nil {
		// The request was not sent, or the server refused its token: the
		// session is as good as it was.
		return ae
	}
	var rpc *jsonrpc.Error
	if errors.As(err, &rpc) && rpc.Code == codeRejected {
		// The request or its answer's stream did not get through (an http
		// server gone or overloaded): the session may still be good, and
		// when the server lost it, its next answer says so and the session
		// ends, which the next call notices.
		return fmt.Errorf("MCP server %q (%s) could not be reached during the call of %s: %w", c.name, c.transport, t.name, err)
	}
	if errors.As(err, &rpc) {
		c.markStale(sess)
		var no *NotOfferedError
		if _, lerr := c.tool(ctx, sess, t.name); errors.As(lerr, &no) {
			return no
		}
		return fmt.Errorf("MCP server %q refused the call of %s: %s", c.name, t.name, rpc.Message)
	}
	c.drop(sess, err)
	if errors.Is(err, sdk.ErrConnectionClosed) {
		return fmt.Errorf("MCP server %q (%s) closed the connection during the call; the next call reconnects", c.name, c.transport)
	}
	return fmt.Errorf("MCP server %q (%s): the call failed, and the next call reconnects: %w", c.name, c.transport, err)
}
