// Package cases runs the end-to-end cases under testdata/cases: one folder
// per application, in the style of sqlc's end-to-end tests, each checked
// through every stage a user meets, by one test (go test ./internal/cases
// -update rewrites what the cases expect).
//
// A case folder holds:
//
//   - app.cue, the application, with the files it names beside it; or
//     source, one line naming an app.cue elsewhere in the repository (the
//     examples). testdata/cases/files holds inputs several cases share, and
//     is no case;
//   - vet.txt, what `aidgen vet` prints for it, run from the repository root:
//     "PATH: ok" for a valid application, every problem at file:line:col for
//     an invalid one;
//   - for a valid application: document.json, the ir.Document it loads to;
//     gen/, the files `aidgen build` writes for it (the copies of the files
//     it reads under gen/app/, go.mod's replace standing for the checkout as
//     /src/aid); and, optionally, requests.json: requests to its service
//     and the answers expected, with what varies between runs (ids, times)
//     written as placeholders.
//
// Besides comparing each stage's output, the test holds what every case
// must satisfy: positions on every error, generation twice to the same
// bytes, the description assembling into a runtime, and, in
// TestCasesBuild, every generated service compiling offline, its literal
// equal to the lowered description, and linking exactly the kinds (and
// drivers) its application uses.
//
// The package has no code of its own; the tests are the point.
package cases
