package agents_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/skill"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
)

// fiftySkills are 50 skills whose instructions are long and distinctive,
// so that a prompt carrying any of them would show it.
func fiftySkills() []agents.Skill {
	out := make([]agents.Skill, 50)
	for i := range out {
		name := fmt.Sprintf("skill-%02d", i)
		out[i] = agents.Skill{
			Name:         name,
			Description:  fmt.Sprintf("Use for task family %d: reports on ledgers of kind %d.", i, i),
			Instructions: fmt.Sprintf("INSTRUCTIONS-%02d ", i) + strings.Repeat("step by step, ", 200),
			Files:        []string{"reference.md"},
			FS:           fstest.MapFS{"reference.md": {Data: []byte(fmt.Sprintf("reference of %s", name))}},
		}
	}
	return out
}

func systemOf(req gateway.Request) string {
	if len(req.Messages) > 0 && req.Messages[0].Role == gateway.RoleSystem {
		return req.Messages[0].Content
	}
	return ""
}

// TestSkillsProgressiveDisclosure: the prompt of an agent with 50 skills
// grows by their names and descriptions (one line each, under one header)
// and by nothing of their instructions; loading one adds its instructions
// to the conversation once, and loading it again does not add them again.
func TestSkillsProgressiveDisclosure(t *testing.T) {
	skills := fiftySkills()
	names := make([]string, len(skills))
	for i, s := range skills {
		names[i] = s.Name
	}
	run := func(list []string, script ...fake.Step) (gateway.Request, []gateway.Request) {
		fx := newFixture(t, fake.Config{Script: script})
		r := newRuntime(t, agents.Config{
			Gateway: fx.gw, Skills: skills,
			Agents: []agents.Agent{{Name: "a", Model: "small", Instructions: "You help.", Skills: list}},
		})
		mustRun(t, r, "a", "hi", agents.RunOptions{})
		reqs := fx.fake.Requests()
		return reqs[0], reqs
	}
	bare, _ := run(nil, answer("ok"))
	with, reqs := run(names,
		calls(call("c1", agents.LoadSkillTool, `{"name":"skill-07"}`)),
		calls(call("c2", agents.LoadSkillTool, `{"name":"skill-07"}`), call("c3", agents.ReadSkillFileTool, `{"skill":"skill-07","path":"reference.md"}`)),
		answer("done"))

	growth := len(systemOf(with)) - len(systemOf(bare))
	want := len(skill.ListingHeader)
	for _, s := range skills {
		want += len(skill.Line(s.Name, s.Description))
	}
	if growth != want {
		t.Errorf("the prompt grew by %d bytes with 50 skills, want %d (a header and one line per skill)", growth, want)
	}
	if strings.Contains(systemOf(with), "INSTRUCTIONS-") {
		t.Error("the prompt carries a skill's instructions before any was loaded")
	}
	for _, s := range skills {
		if !strings.Contains(systemOf(with), skill.Line(s.Name, s.Description)) {
			t.Errorf("the prompt does not list %s", s.Name)
		}
	}
	// The tools grow by two, whatever the number of skills.
	if got := len(with.Tools) - len(bare.Tools); got != 2 {
		t.Errorf("the agent is offered %d more tools with skills, want 2 (load_skill, read_skill_file)", got)
	}

	last := reqs[len(reqs)-1]
	var all strings.Builder
	for _, m := range last.Messages {
		all.WriteString(m.Content)
	}
	if n := strings.Count(all.String(), "INSTRUCTIONS-07"); n != 1 {
		t.Errorf("the last request holds skill-07's instructions %d times, want once", n)
	}
	if strings.Count(all.String(), "INSTRUCTIONS-") != 1 {
		t.Error("loading skill-07 brought in another skill's instructions")
	}
	if !strings.Contains(all.String(), "reference of skill-07") {
		t.Error("read_skill_file did not return the file")
	}
	if !strings.Contains(all.String(), "is loaded already") {
		t.Error("the second load did not say the skill is loaded already")
	}
}

func TestSkillFileReadIsBounded(t *testing.T) {
	big := strings.Repeat("x", 3*agents.DefaultMaxObservationBytes)
	skills := []agents.Skill{{
		Name: "big", Description: "A big file.", Instructions: "Read it.",
		Files: []string{"big.txt"}, FS: fstest.MapFS{"big.txt": {Data: []byte(big)}},
	}}
	fx := newFixture(t, fake.Config{Script: []fake.Step{
		calls(call("c1", agents.ReadSkillFileTool, `{"skill":"big","path":"big.txt"}`),
			call("c2", agents.ReadSkillFileTool, `{"skill":"big","path":"../etc/passwd"}`),
			call("c3", agents.ReadSkillFileTool, `{"skill":"big","path":"big.txt","offset":99999999}`)),
		answer("done"),
	}})
	r := newRuntime(t, agents.Config{Gateway: fx.gw, Skills: skills,
		Agents: []agents.Agent{{Name: "a", Model: "small", Instructions: "x", Skills: []string{"big"}}}})
	// The next model call would not fit 96 KiB: the run ends there, and
	// the step's record holds what the model was told.
	res, _ := r.Run(context.Background(), "a", "hi", agents.RunOptions{})
	if len(res.Steps) == 0 {
		t.Fatal("no step recorded")
	}
	var obs []string
	for _, c := range res.Steps[0].ToolCalls {
		obs = append(obs, c.Observation)
	}
	if len(obs) != 3 {
		t.Fatalf("got %d observations, want 3", len(obs))
	}
	if len(obs[0]) > agents.DefaultMaxObservationBytes || !strings.Contains(obs[0], "read on with offset") {
		t.Errorf("a 96 KiB file was read as %d bytes without the cut's marker", len(obs[0]))
	}
	if !strings.Contains(obs[1], `has no file "../etc/passwd"`) {
		t.Errorf("a path outside the skill's files was not refused: %q", obs[1])
	}
	if !strings.Contains(obs[2], "past the file's end") {
		t.Errorf("an offset past the end: %q", obs[2])
	}
}

func TestSkillsConfigErrors(t *testing.T) {
	fx := newFixture(t, fake.Config{})
	_, err := agents.New(agents.Config{Gateway: fx.gw,
		Skills: []agents.Skill{{Name: "a-b", Description: "d"}, {Name: "a-b", Description: "d"}, {Name: "Bad_Name", Description: "d"}, {Name: "uses", Description: "d", AllowedTools: []string{"missing"}}},
		Agents: []agents.Agent{{Name: "a", Model: "small", Instructions: "x", Skills: []string{"nope", "uses"}}}})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{`skill "a-b" is declared twice`, `skill "Bad_Name"`, `skill "nope" is not in Config.Skills`, `uses tool "missing"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// TestSkillsReplay: a run that loaded a skill and read its file replays
// from its recording on a configuration that holds the skills' names and
// descriptions only (no instructions, no files), calling nothing; a
// changed description is a divergence of the request.
func TestSkillsReplay(t *testing.T) {
	skills := fiftySkills()[:3]
	fx := newFixture(t, fake.Config{Script: []fake.Step{
		calls(call("c1", agents.LoadSkillTool, `{"name":"skill-01"}`)),
		calls(call("c2", agents.ReadSkillFileTool, `{"skill":"skill-01","path":"reference.md"}`)),
		answer("done"),
	}})
	store := agents.NewInMemoryStore()
	ag := []agents.Agent{{Name: "a", Model: "small", Instructions: "You help.", Skills: []string{"skill-00", "skill-01", "skill-02"}}}
	r := newRuntime(t, agents.Config{Gateway: fx.gw, Skills: skills, Agents: ag, Store: store})
	res := mustRun(t, r, "a", "hi", agents.RunOptions{})
	rec, _ := record(t, store, res.RunID)

	bare := make([]agents.Skill, len(skills))
	for i, s := range skills {
		bare[i] = agents.Skill{Name: s.Name, Description: s.Description}
	}
	replayFx := newFixture(t, fake.Config{})
	rep, err := agents.Replay(context.Background(), agents.Config{Gateway: replayFx.gw, Skills: bare, Agents: ag}, rec)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Divergence != nil || rep.Calls != 2 || len(replayFx.fake.Requests()) != 0 {
		t.Fatalf("replay: divergence %+v, %d calls, %d provider calls", rep.Divergence, rep.Calls, len(replayFx.fake.Requests()))
	}
	bare[2].Description = "Changed."
	rep, err = agents.Replay(context.Background(), agents.Config{Gateway: replayFx.gw, Skills: bare, Agents: ag}, rec)
	if err != nil {
		t.Fatal(err)
	}
	if d := rep.Divergence; d == nil || d.Kind != agents.DivergeRequest || !strings.Contains(d.Diff, "skill-02: Changed.") {
		t.Fatalf("a changed description replayed without divergence: %+v", rep.Divergence)
	}
}
