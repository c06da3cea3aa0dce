// Package http is the http tool kind: a tool an application declares with
// implementation {kind: "http", url, headersFromEnv} is answered by POSTing
// the call's arguments, as JSON, to the URL; the response body is the
// observation the model reads.
//
// Kind is the kind's configuration, plain data that an application
// description holds (app.Tool.Kind) and a generated service spells as a
// literal; it implements agents.ToolKind, so it builds its tool itself and
// no registry is involved. New builds the same implementation from Go, for
// teams wiring tools by hand.
//
// A call is bounded: the tool's timeout reaches the request through its
// context, the body read is capped (a larger 2xx body is an error
// observation, never a silently cut document), redirects are followed only
// on the URL's own scheme and host, and header values, which often hold
// secrets, never appear in observations, errors or logs. A status outside
// 2xx is a *StatusError observation quoting the start of the body.
//
// It is not a general HTTP client: the method is always POST and the body
// always the arguments.
package http
