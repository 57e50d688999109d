package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	pb "github.com/agent-harness/agent-harness/gen/go/agentharness/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestControlOfTheLiveProcess: GetContextUsage answers the CLI's figures (the categories
// of kind "used" add up to total_tokens), and StopTask ends one background Bash
// (task_updated killed / task_notification stopped) while the process and the session stay.
func TestControlOfTheLiveProcess(t *testing.T) {
	srv := shared
	id := newSessionID("control")
	s := srv.subscribe(t, id, 0)
	st := srv.start(t, id, "BGBASH sleep 300")

	// Relayed permissions (the server's default): allow the Bash if the CLI asks.
	started, j := s.waitEvent(0, turnTimeout, "task_started (or the permission it needs)", func(ev *pb.Event) bool {
		return kind(ev) == "task_started" || kind(ev) == "permission_requested"
	})
	if req := started.GetPermissionRequested(); req != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := srv.client.RespondPermission(ctx, &pb.RespondPermissionRequest{SessionId: id, RequestId: req.GetRequestId(), Allow: true})
		cancel()
		if err != nil {
			t.Fatalf("RespondPermission: %v", err)
		}
		started, j = s.waitEvent(j+1, turnTimeout, "task_started", isKind("task_started"))
	}
	taskID := started.GetTaskStarted().GetTaskId()
	if taskID == "" {
		t.Fatalf("task_started without task_id: %v", started)
	}
	_, j = s.waitEvent(j, turnTimeout, "turn_end", isKind("turn_end"))
	srv.waitStatus(t, id, pb.SessionStatus_SESSION_STATUS_IDLE, 10*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	usage, err := srv.client.GetContextUsage(ctx, &pb.GetContextUsageRequest{SessionId: id})
	if err != nil {
		t.Fatalf("GetContextUsage: %v", err)
	}
	if usage.GetTotalTokens() == 0 || usage.GetMaxTokens() <= usage.GetTotalTokens() || usage.GetRawMaxTokens() < usage.GetMaxTokens() {
		t.Fatalf("context figures: %v", usage)
	}
	var used uint64
	var names []string
	for _, c := range usage.GetCategories() {
		names = append(names, c.GetName())
		if c.GetKind() == "used" {
			used += c.GetTokens()
		}
	}
	if !strings.Contains(strings.Join(names, "|"), "Messages") {
		t.Fatalf("no Messages category: %v", names)
	}
	if used != usage.GetTotalTokens() {
		t.Fatalf("categories add up to %d, total_tokens %d: %v", used, usage.GetTotalTokens(), usage)
	}
	if raw := usage.GetRaw().GetFields()["totalTokens"].GetNumberValue(); raw != float64(usage.GetTotalTokens()) {
		t.Fatalf("raw totalTokens %v, total_tokens %d", raw, usage.GetTotalTokens())
	}

	ended := func(ev *pb.Event) bool {
		if u := ev.GetTaskUpdated(); u != nil && u.GetTaskId() == taskID && u.GetStatus() == "killed" {
			return true
		}
		n := ev.GetTaskNotification()
		return n != nil && n.GetTaskId() == taskID && n.GetStatus() == "stopped"
	}
	for _, ev := range s.events {
		if ended(ev) {
			t.Fatalf("the task ended before StopTask: %s", s.summary())
		}
	}
	if _, err := srv.client.StopTask(ctx, &pb.StopTaskRequest{SessionId: id, TaskId: taskID, IdempotencyKey: newKey(t)}); err != nil {
		t.Fatalf("StopTask: %v", err)
	}
	s.waitEvent(j, turnTimeout, "the task killed or stopped", ended)

	idle := srv.waitStatus(t, id, pb.SessionStatus_SESSION_STATUS_IDLE, turnTimeout)
	if !idle.GetProcessAlive() || idle.GetRunId() != st.GetRunId() {
		t.Fatalf("after StopTask: %v, want the process of run %s alive", idle, st.GetRunId())
	}
	if sent := srv.send(t, id, "TEXT still here"); sent.GetRunId() != st.GetRunId() {
		t.Fatalf("Send went to run %s, want the same process (run %s)", sent.GetRunId(), st.GetRunId())
	}
	c, _ := s.waitEvent(j, turnTimeout, "the next answer", func(ev *pb.Event) bool { return contentText(ev) == "still here" })
	if c.GetRunId() != st.GetRunId() {
		t.Fatalf("the next answer came from run %s", c.GetRunId())
	}
}

// TestControlWithoutALiveProcess: once the run has ended (here at a 1 s --idle-timeout) both
// calls fail FAILED_PRECONDITION "no live process"; an unknown session is NOT_FOUND.
func TestControlWithoutALiveProcess(t *testing.T) {
	srv := startTestServer(t, "--idle-timeout", "1s")
	id := newSessionID("control-gone")
	s := srv.subscribe(t, id, 0)
	srv.start(t, id, "TEXT hi")
	end, _ := s.waitEvent(0, turnTimeout, "run_end", isKind("run_end"))
	if end.GetRunEnd().GetReason() != pb.RunEndReason_RUN_END_REASON_IDLE_TIMEOUT {
		t.Fatalf("run_end %v, want the idle timeout", end.GetRunEnd())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	want := func(what string, err error, code codes.Code, msg string) {
		t.Helper()
		if status.Code(err) != code || !strings.Contains(status.Convert(err).Message(), msg) {
			t.Fatalf("%s: %v, want %v %q", what, err, code, msg)
		}
	}
	_, err := srv.client.GetContextUsage(ctx, &pb.GetContextUsageRequest{SessionId: id})
	want("GetContextUsage after run_end", err, codes.FailedPrecondition, "no live process")
	_, err = srv.client.StopTask(ctx, &pb.StopTaskRequest{SessionId: id, TaskId: "b123"})
	want("StopTask after run_end", err, codes.FailedPrecondition, "no live process")
	_, err = srv.client.GetContextUsage(ctx, &pb.GetContextUsageRequest{SessionId: newSessionID("nobody")})
	want("GetContextUsage of an unknown session", err, codes.NotFound, "")
	_, err = srv.client.StopTask(ctx, &pb.StopTaskRequest{SessionId: id})
	want("StopTask without task_id", err, codes.InvalidArgument, "task_id")
}
