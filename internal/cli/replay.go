package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/app"
)

// ExitDiverged is aidgen replay's status when the replay differs from its
// recording.
const ExitDiverged = 1

func newReplay(s *streams) *cobra.Command {
	var (
		tags   []string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "replay FILE [APP]",
		Short: "Re-run a recorded run offline and report where it diverges",
		Long: `Replay re-runs a recorded run (an event log written by aidgen run --record,
or fetched from a service's GET /v1/runs/{id}/events?format=jsonl) against
an application file, offline: the recorded model answers stand in for the
providers, the recorded observations for the tools and searches, and the
recorded memory for the stores, so a replay reaches no network and spends
nothing, and the same recording replays the same way. The recording's
people's decisions are applied where the run paused, its continuations and
cancellations where it stopped.

It reports the first place the run would go otherwise: a different request
to the model (a changed prompt, tools or memory), a tool called with other
arguments or with another outcome (denied, refused), another approval
decision, another path through the agents, or another end, with a unified
diff from the recording to the replay. So a recorded run becomes a
regression test after a prompt or code change.

APP defaults to the application file the recording names (aidgen run
--record records it as given on its command line).

Exit status: 0 the replay went as recorded, 1 it diverged, 2 a usage error
(an unreadable recording or application, a recording of an agent the
application does not have).`,
		Example: `  # Record a run, then check it still plays the same after a prompt change.
  aidgen run examples/support-desk/app.cue --record refund.jsonl "I want a refund for order AB-123456"
  aidgen replay refund.jsonl

  # Against another version of the application.
  aidgen replay refund.jsonl path/to/new/app.cue`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return usageErr(errors.New("replay takes a recording and, optionally, an application file; usage: aidgen replay FILE [APP]"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := os.Open(args[0])
			if err != nil {
				return usageErr(fmt.Errorf("reading the recording: %w", err))
			}
			rec, err := agents.ReadRecording(f)
			f.Close()
			if err != nil {
				return usageErr(fmt.Errorf("%s: %w", args[0], err))
			}
			appFile := rec.Run.AppFile
			if len(args) == 2 {
				appFile = args[1]
			}
			if appFile == "" {
				return usageErr(fmt.Errorf("%s does not name its application file; give it: aidgen replay %s APP", args[0], args[0]))
			}
			desc, err := loadDescription(s, appFile, tags)
			if err != nil {
				return err
			}
			cfg, err := app.ReplayConfig(desc, rec.Learned())
			if err != nil {
				return usageErr(err)
			}
			rep, err := agents.Replay(cmd.Context(), cfg, rec)
			if err != nil {
				return usageErr(err)
			}
			if asJSON {
				enc := json.NewEncoder(s.out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(rep); err != nil {
					return &exitError{code: ExitDiverged, err: err}
				}
			} else {
				printReplay(s, rec, rep, appFile, desc)
			}
			if rep.Divergence != nil {
				return &exitError{code: ExitDiverged}
			}
			return nil
		},
	}
	tagFlag(cmd, &tags)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as one JSON object: run_id, status, replay_status, steps, calls, decisions, and divergence (kind, step, depth, agent, call, message, diff) when it diverged")
	return cmd
}

func printReplay(s *streams, rec *agents.Recording, rep *agents.ReplayReport, appFile string, desc app.Description) {
	from := rec.Run.App
	if rec.Run.AppVersion != "" {
		from += " " + rec.Run.AppVersion
	}
	fmt.Fprintf(s.out, "replaying run %s (%s, recorded %s) against %s (%s %s)\n", rep.RunID, strings.TrimSpace(from), rep.Status, appFile, desc.Name, desc.Version)
	counts := fmt.Sprintf("%s, %s, %s", plural(rep.Steps, "model call", "model calls"), plural(rep.Calls, "tool call", "tool calls"), plural(rep.Decisions, "decision", "decisions"))
	if len(rep.DecidedBy) > 0 {
		who := make([]string, len(rep.DecidedBy))
		for i, by := range rep.DecidedBy {
			who[i] = person(by)
		}
		counts += " (by " + strings.Join(who, ", ") + ")"
	}
	d := rep.Divergence
	if d == nil {
		fmt.Fprintf(s.out, "identical: %s replayed, ending %s; no provider, tool or store was called\n", counts, rep.ReplayStatus)
		return
	}
	where := fmt.Sprintf("step %d (%s", d.Step, d.Agent)
	if d.Depth > 0 {
		where += fmt.Sprintf(", delegated %d deep", d.Depth)
	}
	if d.Call != "" {
		where += ", call " + d.Call
	}
	fmt.Fprintf(s.out, "diverged at %s): %s: %s\n", where, d.Kind, d.Message)
	if d.Diff != "" {
		fmt.Fprint(s.out, d.Diff)
		if !strings.HasSuffix(d.Diff, "\n") {
			fmt.Fprintln(s.out)
		}
	}
	fmt.Fprintf(s.out, "replayed as recorded before it: %s\n", counts)
}
