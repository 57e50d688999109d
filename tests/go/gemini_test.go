package e2e

import (
	"context"
	"testing"
	"time"

	pb "github.com/agent-harness/agent-harness/gen/go/agentharness/v1"
)

// TestGeminiTurn: a session started with agent "gemini" runs the real Gemini CLI over the
// Agent Client Protocol (--acp-agent) against the fake's Gemini API. The client sees the
// same log as for claude: the answer as content, run_start/run_ready and Session naming the
// agent, idle after turn_end. ListAgents lists claude, codex and gemini.
func TestGeminiTurn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	agents, err := shared.client.ListAgents(ctx, &pb.ListAgentsRequest{})
	if err != nil {
		t.Fatalf("ListAgents: %v", err)
	}
	type agent struct {
		name, kind string
		isDefault  bool
	}
	var got []agent
	for _, a := range agents.GetAgents() {
		got = append(got, agent{a.GetName(), a.GetKind(), a.GetIsDefault()})
	}
	want := []agent{{"claude", "claude", true}, {"codex", "codex", false}, {"gemini", "acp", false}}
	if len(got) != len(want) {
		t.Fatalf("ListAgents: %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("ListAgents: %v, want %v", got, want)
		}
	}

	id := newSessionID("gemini")
	s := shared.subscribe(t, id, 0)
	s.untilCaughtUp(10 * time.Second)
	st, err := shared.client.Start(ctx, &pb.StartRequest{SessionId: id, Config: &pb.StartConfig{
		Prompt: "TEXT go gemini turn", Cwd: shared.workDir, Agent: "gemini"}})
	if err != nil {
		t.Fatalf("Start(agent gemini): %v", err)
	}

	end, _ := s.waitEvent(0, turnTimeout, "turn_end", isKind("turn_end"))
	if end.GetTurnEnd().GetIsError() {
		t.Fatalf("the Gemini turn failed: %v\n%s", end.GetTurnEnd(), s.summary())
	}
	start, _ := s.waitEvent(0, 0, "run_start", isKind("run_start"))
	if start.GetRunStart().GetAgent() != "gemini" || start.GetRunId() != st.GetRunId() {
		t.Fatalf("run_start %v (run %s), want agent gemini of run %s", start.GetRunStart(), start.GetRunId(), st.GetRunId())
	}
	ready, _ := s.waitEvent(0, 0, "run_ready", isKind("run_ready"))
	if ready.GetRunReady().GetAgent() != "gemini" || ready.GetRunReady().GetResumeId() == "" {
		t.Fatalf("run_ready %v, want agent gemini with a resume id (the ACP session)", ready.GetRunReady())
	}
	c, _ := s.waitEvent(0, 0, "content", isKind("content"))
	if contentText(c) != "go gemini turn" {
		t.Fatalf("Gemini answer %q, want %q", contentText(c), "go gemini turn")
	}

	idle := shared.waitStatus(t, id, pb.SessionStatus_SESSION_STATUS_IDLE, 10*time.Second)
	if idle.GetAgent() != "gemini" || !idle.GetProcessAlive() {
		t.Fatalf("GetSession after the Gemini turn: %v, want agent gemini with its process alive", idle)
	}
}
