package e2e

import (
	"context"
	"testing"
	"time"

	pb "github.com/agent-harness/agent-harness/gen/go/agentharness/v1"
)

// TestCodexTurn: a session started with agent "codex" runs the real codex app-server against
// the fake's Responses API. The client sees the same log as for claude: the answer as
// content, run_start/run_ready and Session naming the agent, idle after turn_end.
func TestCodexTurn(t *testing.T) {
	id := newSessionID("codex")
	s := shared.subscribe(t, id, 0)
	s.untilCaughtUp(10 * time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := shared.client.Start(ctx, &pb.StartRequest{SessionId: id, Config: &pb.StartConfig{
		Prompt: "TEXT go codex turn", Cwd: shared.workDir, Agent: "codex"}})
	if err != nil {
		t.Fatalf("Start(agent codex): %v", err)
	}

	end, _ := s.waitEvent(0, turnTimeout, "turn_end", isKind("turn_end"))
	if end.GetTurnEnd().GetIsError() {
		t.Fatalf("the Codex turn failed: %v\n%s", end.GetTurnEnd(), s.summary())
	}
	start, _ := s.waitEvent(0, 0, "run_start", isKind("run_start"))
	if start.GetRunStart().GetAgent() != "codex" || start.GetRunId() != st.GetRunId() {
		t.Fatalf("run_start %v (run %s), want agent codex of run %s", start.GetRunStart(), start.GetRunId(), st.GetRunId())
	}
	ready, _ := s.waitEvent(0, 0, "run_ready", isKind("run_ready"))
	if ready.GetRunReady().GetAgent() != "codex" || ready.GetRunReady().GetResumeId() == "" {
		t.Fatalf("run_ready %v, want agent codex with a resume id (the thread)", ready.GetRunReady())
	}
	c, _ := s.waitEvent(0, 0, "content", isKind("content"))
	if contentText(c) != "go codex turn" {
		t.Fatalf("Codex answer %q, want %q", contentText(c), "go codex turn")
	}

	idle := shared.waitStatus(t, id, pb.SessionStatus_SESSION_STATUS_IDLE, 10*time.Second)
	if idle.GetAgent() != "codex" || !idle.GetProcessAlive() {
		t.Fatalf("GetSession after the Codex turn: %v, want agent codex with its process alive", idle)
	}
	// ListSessions names it too (paged: the shared server holds every test's sessions).
	token := ""
	for {
		list, err := shared.client.ListSessions(ctx, &pb.ListSessionsRequest{PageToken: token})
		if err != nil {
			t.Fatalf("ListSessions: %v", err)
		}
		for _, sess := range list.GetSessions() {
			if sess.GetSessionId() == id {
				if sess.GetAgent() != "codex" {
					t.Fatalf("ListSessions names agent %q for the Codex session", sess.GetAgent())
				}
				return
			}
		}
		if token = list.GetNextPageToken(); token == "" {
			t.Fatalf("ListSessions has no session %s", id)
		}
	}
}
