// Package kind is the contract between aid's extension points and the
// kinds that plug into them: provider kinds (runtime/gateway/...), tool
// kinds (runtime/agents/tools/...), store kinds (runtime/retrieval/...)
// and resources, the named app-level declarations a kind owns (a server
// several tools of one kind share).
//
// A kind is one package. It owns its typed configuration, a struct of
// plain data whose JSON field names are the IR's, and builds itself from
// it: the configuration implements its extension point's interface
// (gateway.ProviderKind, agents.ToolKind, retrieval.StoreKind, ResourceKind)
// with a method that builds the provider, tools or store. An application
// description (runtime/app) holds each element's configuration in a field
// of that interface type, so a generated service, which spells its
// description as a Go literal, imports exactly the kind packages its
// application uses and links nothing else. There is no registry to fill at
// init time: the value is its own constructor.
//
// What this package holds is what the parts of aid that cannot import the
// kind packages need to know about them, written once:
//
//   - the names of the kinds, one list per extension point (Names, Deferred,
//     Lookup), which the IR schema spells again and a test in the module
//     root holds equal; ir (aidgen vet) reads them rather than its own;
//   - which fields of a kind's configuration name files the application
//     ships or refer to a resource (Info.Files, Info.Refs), so that vet
//     checks them and aidgen build embeds them without knowing the kind;
//   - the rules over several fields of a kind's configuration, such as
//     exactly one of the http tool's url and urlEnv (Info.OneOf), stated
//     once and checked by Info.CheckOneOf, which vet calls at the field's
//     position and the kind's constructor on its configuration;
//   - Env, what an extension point lends a kind's constructor: the
//     application's files, the environment, an HTTP client, a logger and
//     a Scope holding what kinds open once per application (connection
//     pools, server sessions) and close with it.
//
// It imports nothing but the standard library, so that ir may import it
// without linking a provider SDK, a database driver or OpenTelemetry.
//
// # Adding a kind
//
// A new kind is a package under its extension point's directory (the
// folder tree is the list of kinds), plus four edits outside it: its name
// (and Info) in the list here, its decoder in internal/lower's table (how
// the IR's block becomes its configuration), its fields in schema.cue, and
// its documentation in the README. Nothing else names it: ir checks it
// from the schema and its Info, gen spells it with gen.Literal, and the
// runtime builds it through its interface.
package kind
