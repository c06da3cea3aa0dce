package aid

// Version is the version of aid: the generator and the runtime are
// versioned together, so one number says what produced a baseline, a
// generated service or a trace.
const Version = "0.1.0-dev"
