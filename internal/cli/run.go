package cli

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"regexp"

	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/aidgen/aid/internal/filestore"
	"github.com/aidgen/aid/internal/lower"
	"github.com/aidgen/aid/ir"
	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/app"
	"github.com/aidgen/aid/runtime/app/appeval"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/kind"
	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/serve/postgres"
)

// Exit codes of aidgen run beyond the shared ones: 0 (ExitOK) is a run
// that completed with an answer, 2 (ExitUsage) a usage or configuration
// error, including a resume of a run that is unknown or not paused.
const (
	// ExitRunFailed is a run that ended without an answer: failed,
	// max_steps, timed_out, cancelled or budget_exceeded.
	ExitRunFailed = 1
	// ExitPaused is a run waiting for a human decision; resume it with
	// --resume. It is not 3, which eval uses for inconclusive.
	ExitPaused = 4
)

// RunStateDirEnv names the environment variable that overrides where
// aidgen run keeps the runs of applications whose state is in memory.
const RunStateDirEnv = kind.EnvStateDir

// defaultRunUser is the user id of a run that names none: agents with user
// memory need one.
const defaultRunUser = "local"

type runFlags struct {
	tags      []string
	agent     string
	resume    string
	recover   string
	cont      string
	cancel    string
	steps     int
	timeout   time.Duration
	record    string
	approve   bool
	reject    bool
	feedback  string
	arguments string
	scope     string
	user      string
	thread    string
	history   string
	stateDir  string
	json      bool
	verbose   bool
}

func newRun(s *streams) *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run FILE [--agent NAME] MESSAGE | run FILE --resume RUN_ID --approve|--reject | run FILE --continue|--cancel RUN_ID",
		Short: "Run an agent of an application on one message, and resume paused runs",
		Long: `Run runs one agent of an application on a message, on the application's
own providers (the keyless fake of the examples, or real ones with their API
keys in the environment), and prints each step: the agent and the alias that
answered it ("degraded from" after a budget breach, "fell back from" when a
fallback answered), the tool calls with their arguments and observations
(cut to one line; --verbose prints them whole), delegated runs indented under
their call, handoffs as "→ agent", the cost of each step and of the run, and
then the answer. --agent defaults to the application's service.entry, or to
its only agent.

Retrievers whose store is in memory start empty, so they are ingested before
the run (their embedding calls are charged like any other); those in a
pgvector store are searched as they are: fill them with aidgen index.

A tool that needs approval pauses the run. Run prints the pending call and
the commands that continue it, in this process or any later one:

  aidgen run FILE --resume RUN_ID --approve [--arguments JSON] [--feedback TEXT]
  aidgen run FILE --resume RUN_ID --reject [--feedback TEXT]

--arguments replaces the model's arguments on approval (they are checked
against the tool's schema); --feedback is a note for the model, which on a
rejection says why. --scope run approves the tool for the rest of the run,
--scope thread for the run's thread (its later runs too), so that the
approval policy does not ask again; the grant and who gave it (the login
name) are kept with the run. A run whose process died mid-run (killed, or the machine
stopped) is continued with --recover RUN_ID: calls that finished are not
repeated, an unfinished read is run again, an unfinished write pauses for a
decision.

A run that stopped early keeps its partial result: max_steps (the agent
used its maxSteps), timed_out (its run or step timeout, see the agents'
and the service's timeouts) or cancelled. --continue RUN_ID continues it
as the same run, with a fresh allowance: --steps N more model calls
(default: the agent's maxSteps) and, with --timeout D, a run timeout of D
for this drive. A step that stopped during its tool calls is completed
first: an interrupted read runs again, an interrupted write waits for a
decision.

--cancel RUN_ID stops a run that another process drives (another aidgen
run, or a replica of the application's service on the same PostgreSQL
state): the process sees the request (at once through PostgreSQL, within
a tenth of a second through the state directory), cancels the call in
flight, recording a write stopped mid-call as interrupted, never done, and
saves the run cancelled with its partial result; a paused run is cancelled
by the command itself. It waits for the run to stop, up to --timeout
(default 30s), and prints it; a cancelled run can be continued.

--record FILE writes the run's event log when the command ends, whatever it
ended with: the run, every model request and answer with the pinned model
that answered, every tool call with its arguments, observation and the
approval decisions, delegated runs in place, as JSON Lines. aidgen replay
FILE re-runs it offline against the application (see aidgen replay --help);
record again after a resume or a continuation to log the whole run.

Where runs are kept follows service.state. With "memory" (the default) a
command is not a long-lived service, so runs are kept in files, one per run:
in --state-dir, else $` + RunStateDirEnv + `, else $XDG_STATE_HOME/aid/runs/APP
(~/.local/state/aid/runs/APP when XDG_STATE_HOME is unset; the user cache
directory on macOS and Windows). Writes are atomic and locked, so two
processes never both resume one pause. With "postgres" runs, the budget
ledger and memory are in the database its dsnEnv names, shared with the
application's service. Budgets of a memory-state application are counted in
the command's memory: a resumed run's run-scoped budget counts only what is
spent after the resume.

Exit status: 0 completed with an answer, 4 paused for a decision, 1 the run
ended without an answer (failed, max_steps, timed_out, cancelled,
budget_exceeded), 2 a usage or configuration error (invalid application,
unknown agent, a resume of a run that is unknown, not paused, or resumed by
another process first; a continue of a run that did not stop early; a
cancel of a run that is neither running nor paused). --cancel exits 0 once
the run is cancelled, 1 when it had not stopped within --timeout (the
request stays recorded).

--json prints one JSON object instead (stdout holds nothing else): run_id,
status, agent, path, answer, steps (each as in a checkpoint: number, agent,
alias, requested, model, degraded_from, text, usage, cost_usd, tool_calls
with arguments, observation, error_kind, approval and delegate), usage,
cost_usd, fell_back, last_text, messages (the thread, for a next run),
pending (tool, arguments, reason and the resume commands) and checkpoint
when paused, checkpoint and continue_command when it stopped early, and
error when the run failed. Fields are only ever added.`,
		Example: `  # The support desk on its keyless fake: a lookup, a handoff to billing, a
  # delegation to the researcher, then a refund that waits for approval.
  aidgen run examples/support-desk/app.cue --agent triage "I want a refund for order AB-123456"

  # Approve it, from another shell or much later.
  aidgen run examples/support-desk/app.cue --resume run_0123abcd... --approve

  # Or reject it, telling the model why.
  aidgen run examples/support-desk/app.cue --resume run_0123abcd... --reject --feedback "store credit only"

  # Continue a run that timed out or used its steps, with four more steps.
  aidgen run examples/support-desk/app.cue --continue run_0123abcd... --steps 4

  # Stop a run another process drives.
  aidgen run examples/support-desk/app.cue --cancel run_0123abcd...`,
		Args: func(cmd *cobra.Command, args []string) error {
			if f.resume != "" || f.recover != "" || f.cont != "" || f.cancel != "" {
				if len(args) != 1 {
					return usageErr(errors.New("a resume, recovery, continuation or cancellation takes the application file only; usage: aidgen run FILE --resume RUN_ID --approve|--reject"))
				}
				return nil
			}
			switch len(args) {
			case 0:
				return usageErr(errors.New("run needs an application file and a message; usage: aidgen run FILE [--agent NAME] MESSAGE"))
			case 1:
				return usageErr(errors.New("run needs a message after the application file; usage: aidgen run FILE [--agent NAME] MESSAGE"))
			case 2:
				return nil
			}
			return usageErr(fmt.Errorf("run takes one message, got %d words; quote it: aidgen run %s \"%s\"", len(args)-1, args[0], strings.Join(args[1:], " ")))
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.check(cmd); err != nil {
				return usageErr(err)
			}
			return runRun(cmd.Context(), s, args, f)
		},
	}
	fl := cmd.Flags()
	tagFlag(cmd, &f.tags)
	fl.StringVar(&f.agent, "agent", "", "the agent that answers the message (default: the application's service.entry)")
	fl.StringVar(&f.resume, "resume", "", "continue the paused run `RUN_ID` with --approve or --reject")
	fl.StringVar(&f.recover, "recover", "", "continue the run `RUN_ID` whose process died")
	fl.StringVar(&f.cont, "continue", "", "continue the run `RUN_ID` that stopped early (max_steps, timed_out, cancelled)")
	fl.StringVar(&f.cancel, "cancel", "", "stop the run `RUN_ID`, wherever it is driven")
	fl.StringVar(&f.record, "record", "", "write the run's event log to `FILE` (JSON Lines) when the command ends, for aidgen replay")
	fl.IntVar(&f.steps, "steps", 0, "with --continue: `N` more model calls (default: the agent's maxSteps)")
	fl.DurationVar(&f.timeout, "timeout", 0, "with --continue: the run timeout `D` of the continued drive (default: the agent's); with --cancel: how long to wait for the run to stop (default 30s)")
	fl.BoolVar(&f.approve, "approve", false, "with --resume: run the pending call")
	fl.BoolVar(&f.reject, "reject", false, "with --resume: do not run the pending call; the model is told")
	fl.StringVar(&f.feedback, "feedback", "", "with --resume: a note for the model (why, on a rejection)")
	fl.StringVar(&f.arguments, "arguments", "", "with --resume --approve: `JSON` arguments that replace the model's")
	fl.StringVar(&f.scope, "scope", "", "with --resume --approve: how far the approval reaches: call (the default), run (the tool for the rest of the run) or thread (the tool in the run's thread)")
	fl.StringVar(&f.user, "user", defaultRunUser, "the user `ID` the run is for: the subject of user memory")
	fl.StringVar(&f.thread, "thread", "", "the conversation thread `ID`: the key of thread-scoped budgets")
	fl.StringVar(&f.history, "history", "", "the thread so far: the `FILE` an earlier aidgen run --json wrote, whose messages (a compacted thread's summary included) come before the message")
	fl.StringVar(&f.stateDir, "state-dir", "", "where runs are kept when the application's state is in memory (see above)")
	fl.BoolVar(&f.json, "json", false, "print the result as one JSON object")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "print arguments, observations and texts whole, and log ingests, retries and fallbacks to stderr")
	return cmd
}

// check refuses flag combinations that mean nothing.
func (f *runFlags) check(cmd *cobra.Command) error {
	changed := func(names ...string) []string {
		var out []string
		for _, n := range names {
			if cmd.Flags().Changed(n) {
				out = append(out, "--"+n)
			}
		}
		return out
	}
	if n := len(slices.DeleteFunc([]string{f.resume, f.recover, f.cont, f.cancel}, func(s string) bool { return s == "" })); n > 1 {
		return errors.New("give one of --resume, --recover, --continue and --cancel, not both")
	}
	if f.resume != "" || f.recover != "" || f.cont != "" || f.cancel != "" {
		if c := changed("agent", "user", "thread", "history"); len(c) > 0 {
			return fmt.Errorf("%s cannot change a run that has started; leave %s out", c[0], c[0])
		}
	}
	if f.cancel != "" {
		if c := changed("approve", "reject", "feedback", "arguments", "steps"); len(c) > 0 {
			return fmt.Errorf("%s does not go with --cancel", c[0])
		}
		if f.timeout < 0 {
			return errors.New("--timeout cannot be negative")
		}
		return nil
	}
	if f.cont == "" {
		if c := changed("steps", "timeout"); len(c) > 0 {
			return fmt.Errorf("%s goes with --continue RUN_ID", c[0])
		}
	} else {
		if f.steps < 0 || f.timeout < 0 {
			return errors.New("--steps and --timeout cannot be negative")
		}
		if c := changed("approve", "reject", "feedback", "arguments"); len(c) > 0 {
			return fmt.Errorf("%s goes with --resume, not --continue", c[0])
		}
		return nil
	}
	if f.resume == "" {
		if c := changed("scope"); len(c) > 0 {
			return errors.New("--scope decides how far an approval reaches: use it with --resume RUN_ID --approve")
		}
	}
	if f.recover != "" {
		if c := changed("approve", "reject", "feedback", "arguments"); len(c) > 0 {
			return fmt.Errorf("%s goes with --resume, not --recover", c[0])
		}
		return nil
	}
	if f.resume == "" {
		if c := changed("approve", "reject", "feedback", "arguments"); len(c) > 0 {
			return fmt.Errorf("%s decides a paused run: use it with --resume RUN_ID", c[0])
		}
		if f.user == "" {
			return errors.New("--user cannot be empty")
		}
		return nil
	}
	if f.approve == f.reject {
		return errors.New("--resume needs exactly one of --approve and --reject")
	}
	switch agents.GrantScope(f.scope) {
	case "", agents.GrantCall, agents.GrantRun, agents.GrantThread:
		if f.reject && f.scope != "" && f.scope != string(agents.GrantCall) {
			return errors.New("--scope reaches beyond the call with --approve only; a rejection is for the call")
		}
	default:
		return fmt.Errorf("--scope is call, run or thread, not %q", f.scope)
	}
	if f.arguments != "" {
		if f.reject {
			return errors.New("--arguments edits an approved call; a rejected call does not run")
		}
		if !json.Valid([]byte(f.arguments)) {
			return fmt.Errorf("--arguments is not valid JSON: %s", f.arguments)
		}
	}
	return nil
}

func runRun(ctx context.Context, s *streams, args []string, f runFlags) error {
	path := args[0]
	desc, err := loadDescription(s, path, f.tags)
	if err != nil {
		return err
	}
	if len(desc.Agents) == 0 {
		return usageErr(fmt.Errorf("%s defines no agents", path))
	}
	st, err := openRunState(ctx, s, desc, f.stateDir)
	if err != nil {
		return usageErr(err)
	}
	defer st.close()
	opts := st.options
	if f.verbose {
		opts.Logger = slog.New(slog.NewTextHandler(s.err, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	a, err := app.Assemble(ctx, desc, opts)
	if err != nil {
		return usageErr(err)
	}
	defer a.Close()
	p := &runPrinter{w: s.out, verbose: f.verbose, cmd: resumeCommand(path, f.stateDir, f.tags), app: path}
	if f.cancel != "" {
		return cancelRun(ctx, s, a, p, f, st.where)
	}

	// What the run starts from, to ingest the retrievers it can reach and,
	// on a resume, to print only the steps that are new.
	agent, input := f.agent, ""
	var before *agents.RunRecord
	switch {
	case f.resume != "" || f.recover != "" || f.cont != "":
		id := f.resume + f.recover + f.cont
		rec, err := a.Agents.Store().LoadRun(ctx, id)
		var nf *agents.RunNotFoundError
		if errors.As(err, &nf) {
			return usageErr(fmt.Errorf("no run %s in %s (was it started with another --state-dir, or another application?)", id, st.where))
		}
		if err != nil {
			return usageErr(fmt.Errorf("reading run %s: %w", id, err))
		}
		switch {
		case f.cont != "":
			if !agents.Continuable(rec.Status) {
				return usageErr(fmt.Errorf("run %s is %s: only a run that stopped early (max_steps, timed_out, cancelled) can be continued", id, rec.Status))
			}
		case f.recover != "" && rec.Status != agents.StatusRunning:
			return usageErr(fmt.Errorf("run %s is %s, not %s: nothing to recover", id, rec.Status, agents.StatusRunning))
		case f.resume != "" && rec.Status != agents.StatusPaused:
			return usageErr(fmt.Errorf("run %s is %s, not %s: nothing to resume", id, rec.Status, agents.StatusPaused))
		}
		before, agent = &rec, rec.Agent
	default:
		input = args[1]
		if agent == "" {
			agent = desc.Service.Entry
		}
		if agent == "" && len(desc.Agents) == 1 {
			agent = desc.Agents[0].Name
		}
		if agent == "" {
			return usageErr(fmt.Errorf("name the agent with --agent (%s sets no service.entry); agents: %s", path, strings.Join(a.Agents.Agents(), ", ")))
		}
		if !slices.Contains(a.Agents.Agents(), agent) {
			return usageErr(fmt.Errorf("%s has no agent %q; agents: %s", path, agent, strings.Join(a.Agents.Agents(), ", ")))
		}
	}
	if err := ingestReachable(ctx, s, desc, a, agent, f.verbose); err != nil {
		return usageErr(err)
	}

	var res agents.RunResult
	switch {
	case f.resume != "":
		d := agents.Decision{Action: agents.Reject, Feedback: f.feedback, Scope: agents.GrantScope(f.scope), By: runBy()}
		if f.approve {
			d.Action = agents.Approve
			if f.arguments != "" {
				d.Arguments = json.RawMessage(f.arguments)
			}
		}
		res, err = a.Agents.Resume(ctx, f.resume, d)
		var invalid *agents.InvalidArgumentsError
		var noAgent *agents.UnknownAgentError
		var noTool *agents.UnknownToolError
		if errors.As(err, &invalid) || errors.As(err, &noAgent) || errors.As(err, &noTool) {
			// Refused before the run was claimed: it is still paused, and
			// can be decided again.
			return usageErr(err)
		}
		if !f.json {
			p.resuming(before, d)
		}
	case f.recover != "":
		if !f.json {
			fmt.Fprintf(s.out, "recovering run %s on %s\n", f.recover, before.Agent)
		}
		res, err = a.Agents.Drive(ctx, f.recover, agents.DriveOptions{})
	case f.cont != "":
		if !f.json {
			p.continuing(before, f.steps)
		}
		res, err = a.Agents.Continue(ctx, f.cont, agents.ContinueOptions{Steps: f.steps, Timeout: f.timeout, By: runBy()})
	default:
		history, herr := readHistory(f.history)
		if herr != nil {
			return usageErr(herr)
		}
		res, err = a.Agents.Run(ctx, agent, input, agents.RunOptions{UserID: f.user, ThreadID: f.thread, History: history})
	}
	var np *agents.WrongStatusError
	var nc *agents.NotContinuableError
	var ce *agents.ConflictError
	switch {
	case errors.As(err, &np), errors.As(err, &nc):
		// Another process moved the run on between the check and the
		// claim.
		return usageErr(err)
	case errors.As(err, &ce) && before != nil && len(res.Steps) == 0:
		// Another process claimed the same pause first; this one ran
		// nothing.
		return usageErr(fmt.Errorf("run %s was resumed by another process first (its record moved on from version %d); this one ran nothing", before.RunID, ce.Version))
	}

	if f.json {
		if jerr := writeRunJSON(s, res, err, p.cmd); jerr != nil {
			return &exitError{code: ExitRunFailed, err: jerr}
		}
	} else {
		from := 0
		if before != nil {
			from = len(before.Checkpoint.Steps)
		}
		p.result(res, from, st.where)
	}
	if f.record != "" && res.RunID != "" {
		if rerr := recordRun(ctx, a, res.RunID, f.record, path); rerr != nil {
			return &exitError{code: ExitRunFailed, err: errors.Join(rerr, err)}
		}
	}
	return runExit(res, err)
}

// recordRun writes the stored run's event log to file (agents.Record),
// naming the application file for aidgen replay.
func recordRun(ctx context.Context, a *app.App, runID, file, appFile string) error {
	rec, err := a.Agents.Store().LoadRun(context.WithoutCancel(ctx), runID)
	if err != nil {
		return fmt.Errorf("recording run %s: %w", runID, err)
	}
	var b bytes.Buffer
	d := a.Description()
	if err := agents.Record(&b, rec, d.Name, d.Version, appFile); err != nil {
		return err
	}
	if err := os.WriteFile(file, b.Bytes(), 0o600); err != nil {
		return fmt.Errorf("recording run %s: %w", runID, err)
	}
	return nil
}

// cancelWait is how long --cancel waits for the run to stop by default.
const cancelWait = 30 * time.Second

// cancelRun is aidgen run --cancel: it asks whoever drives the run to stop
// it, waits, and prints the cancelled run.
func cancelRun(ctx context.Context, s *streams, a *app.App, p *runPrinter, f runFlags, where string) error {
	wctx, stop := context.WithTimeout(ctx, cmp.Or(f.timeout, cancelWait))
	defer stop()
	rec, err := a.Agents.Cancel(wctx, f.cancel, agents.CancelOptions{By: runBy()})
	var nf *agents.RunNotFoundError
	var nc *agents.NotCancellableError
	var pending *agents.CancelPendingError
	switch {
	case errors.As(err, &nf):
		return usageErr(fmt.Errorf("no run %s in %s (was it started with another --state-dir, or another application?)", f.cancel, where))
	case errors.As(err, &nc):
		return usageErr(err)
	case errors.As(err, &pending):
		return &exitError{code: ExitRunFailed, err: fmt.Errorf("run %s has not stopped within %v; the request stays recorded: the process driving it stops it when it sees the request (a run whose process is gone stops when it is recovered)", f.cancel, cmp.Or(f.timeout, cancelWait))}
	case err != nil:
		return &exitError{code: ExitRunFailed, err: err}
	}
	res := agents.RunResult{
		RunID: rec.RunID, Agent: rec.Agent, Path: rec.Checkpoint.Path, Status: rec.Status, Steps: rec.Checkpoint.Steps,
		Usage: rec.Checkpoint.Usage.Usage(), CostUSD: rec.Checkpoint.CostUSD, Checkpoint: &rec.Checkpoint,
	}
	if p := rec.Checkpoint.Pending; p != nil {
		res.Steps = append(slices.Clone(res.Steps), p.Step)
	}
	res.LastText = agents.LastText(res.Steps)
	if f.json {
		if err := writeRunJSON(s, res, nil, p.cmd); err != nil {
			return &exitError{code: ExitRunFailed, err: err}
		}
		return nil
	}
	who := ""
	if c := rec.Checkpoint.Cancel; c != nil && c.By != "" {
		who = " by " + c.By
	}
	fmt.Fprintf(s.out, "cancelled run %s on %s%s\n", rec.RunID, rec.Agent, who)
	p.result(res, 0, where)
	if f.record != "" {
		return recordRun(ctx, a, rec.RunID, f.record, p.app)
	}
	return nil
}

// runExit is the one place a run's outcome becomes an exit status.
func runExit(res agents.RunResult, err error) error {
	switch {
	case err == nil && res.Status == agents.StatusCompleted:
		return nil
	case err == nil && res.Status == agents.StatusPaused:
		return &exitError{code: ExitPaused}
	case err == nil:
		return &exitError{code: ExitRunFailed, err: fmt.Errorf("run %s ended %s", res.RunID, res.Status)}
	}
	return &exitError{code: ExitRunFailed, err: err}
}

// runBy names the person running the command in a run's record: the
// login name, when the system knows it.
func runBy() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return ""
}

// loadDescription loads, validates and lowers an application file,
// printing IR errors with their positions.
func loadDescription(s *streams, path string, tags []string, opts ...ir.Option) (app.Description, error) {
	desc, _, err := loadWithEvals(s, path, tags, opts...)
	return desc, err
}

// loadWithEvals is loadDescription with the application's evals, which
// are not part of its description (see runtime/app/appeval).
func loadWithEvals(s *streams, path string, tags []string, opts ...ir.Option) (app.Description, []appeval.Eval, error) {
	doc, err := ir.Load(path, append([]ir.Option{ir.Tags(tags...)}, opts...)...)
	if err != nil {
		if es, ok := ir.IsInvalid(err); ok {
			fmt.Fprintln(s.err, es.Error())
			return app.Description{}, nil, usageErr(fmt.Errorf("%s is not a valid application; fix the errors above", path))
		}
		return app.Description{}, nil, usageErr(err)
	}
	desc, err := lower.Document(doc)
	if err != nil {
		return app.Description{}, nil, usageErr(err)
	}
	return desc, lower.Evals(doc), nil
}

// runState is where a command keeps runs: the options that put them there,
// a description of the place for messages, and what to close at exit.
type runState struct {
	options app.Options
	where   string
	closers []func()
}

func (st *runState) close() {
	for _, c := range slices.Backward(st.closers) {
		c()
	}
}

// openRunState picks the run store of service.state: files for memory
// state (a command does not outlive a pause), PostgreSQL for postgres, with
// the database's ledger, opened by postgres.OpenState as the application's
// service opens them, and closed with the application, and the embedding
// cache. Stores of kind pgvector open themselves, through their kind, and
// agents' memory in them is opened by postgres.OpenMemory.
func openRunState(ctx context.Context, s *streams, desc app.Description, stateDir string) (*runState, error) {
	st := &runState{}
	cache, closeCache := embeddingCache(s, desc)
	st.options.EmbeddingCache = cache
	st.options.OpenMemory = postgres.OpenMemory
	st.closers = append(st.closers, closeCache)
	switch desc.Service.State.Kind {
	case app.StatePostgres:
		if stateDir != "" {
			return nil, fmt.Errorf("--state-dir applies to applications whose state is in memory; %s keeps its runs in PostgreSQL (%s)", desc.Name, desc.Service.State.DSNEnv)
		}
		st.where = "PostgreSQL ($" + desc.Service.State.DSNEnv + ")"
		st.options.OpenState = postgres.OpenState
	default:
		dir := stateDir
		if dir == "" {
			var err error
			if dir, err = defaultStateDir(desc.Name); err != nil {
				st.close()
				return nil, err
			}
		}
		fs, err := filestore.Open(dir)
		if err != nil {
			st.close()
			return nil, fmt.Errorf("opening the run state: %w", err)
		}
		st.where = fs.Dir()
		st.options.RunStore = fs
	}
	return st, nil
}

// defaultStateDir is where runs of an application with memory state are
// kept when --state-dir is not given: $AID_STATE_DIR, else the XDG state
// directory (the user cache directory where XDG does not apply), under
// aid/runs/APP.
func defaultStateDir(appName string) (string, error) {
	if d := os.Getenv(RunStateDirEnv); d != "" {
		return d, nil
	}
	if appName == "" || appName != filepath.Base(appName) || strings.HasPrefix(appName, ".") {
		return "", fmt.Errorf("application name %q cannot name a state directory; give --state-dir", appName)
	}
	base, err := kind.StateHome(nil)
	if err != nil {
		return "", fmt.Errorf("%v; give --state-dir", err)
	}
	return filepath.Join(base, "aid", "runs", appName), nil
}

// ingestReachable ingests the memory-store retrievers of the agents a run
// of agent can reach, which start empty in every process. Retrievers in
// pgvector are left as they are: indexing them is aidgen index's job.
func ingestReachable(ctx context.Context, s *streams, desc app.Description, a *app.App, agent string, verbose bool) error {
	byName := make(map[string]agents.Agent, len(desc.Agents))
	for _, ag := range desc.Agents {
		byName[ag.Name] = ag
	}
	stores := make(map[string]retrieval.StoreConfig, len(desc.Stores))
	for _, st := range desc.Stores {
		stores[st.Name] = st
	}
	storeOf := make(map[string]string, len(desc.Retrievers))
	for _, r := range desc.Retrievers {
		storeOf[r.Name] = r.Store
	}
	seen := map[string]bool{agent: true}
	queue := []string{agent}
	var names []string
	for len(queue) > 0 {
		ag := byName[queue[0]]
		queue = queue[1:]
		for _, r := range ag.Retrievers {
			if stores[storeOf[r]].InMemory() && !slices.Contains(names, r) {
				names = append(names, r)
			}
		}
		for _, n := range slices.Concat(ag.Handoffs, ag.Delegates) {
			if !seen[n] {
				seen[n] = true
				queue = append(queue, n)
			}
		}
	}
	slices.Sort(names)
	for _, n := range names {
		r, ok := a.Retrievers[n]
		if !ok {
			return fmt.Errorf("retriever %q was not built", n)
		}
		stats, err := r.Ingest(ctx)
		if err != nil {
			return fmt.Errorf("ingesting retriever %q: %w", n, err)
		}
		if verbose {
			fmt.Fprintf(s.err, "ingested %s: %s, %s\n", n, plural(stats.Files, "file", "files"), plural(stats.Added+stats.Unchanged, "chunk", "chunks"))
		}
	}
	return nil
}

// resumeCommand is the start of the command line that continues a run:
// the same tags, file and state directory, quoted for a POSIX shell. The
// tags come along because they can choose where runs are kept (a
// state=postgres tag) or what the agents are: without them the command
// would look for the run in another place, or drive another app.
func resumeCommand(path, stateDir string, tags []string) string {
	cmd := "aidgen run"
	for _, t := range tags {
		cmd += " -t " + shellQuote(t)
	}
	cmd += " " + shellQuote(path)
	if stateDir != "" {
		cmd += " --state-dir " + shellQuote(stateDir)
	}
	return cmd
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_./:=@%+,-]+$`)

// shellQuote quotes s for a POSIX shell, leaving plain words as they are.
func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// readHistory reads the thread a run continues (--history): the messages
// of the JSON an earlier aidgen run --json wrote. No file is no history.
func readHistory(file string) ([]gateway.Message, error) {
	if file == "" {
		return nil, nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--history: %w", err)
	}
	var prev struct {
		Messages *[]agents.SavedMessage `json:"messages"`
	}
	if err := json.Unmarshal(data, &prev); err != nil || prev.Messages == nil {
		return nil, fmt.Errorf("--history: %s is not the JSON of aidgen run --json (an object with messages)", file)
	}
	out := make([]gateway.Message, len(*prev.Messages))
	for i, m := range *prev.Messages {
		out[i] = m.Message()
	}
	return out, nil
}
