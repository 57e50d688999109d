package e2e

import (
	"testing"

	pb "github.com/agent-harness/agent-harness/gen/go/agentharness/v1"
	"google.golang.org/grpc/codes"
)

// TestSetTitle: a session is titled by the first line of its first prompt; SetTitle names it
// (trimmed), GetSession reads it back, a keyed repeat answers the same seq, an empty title
// goes back to the derived one, and a title of two lines or an unknown session is refused.
func TestSetTitle(t *testing.T) {
	srv := shared
	id := newSessionID("title")
	srv.start(t, id, "TEXT name me\nsecond line")
	s := srv.waitStatus(t, id, pb.SessionStatus_SESSION_STATUS_IDLE, turnTimeout)
	if s.GetTitle() != "TEXT name me" || s.GetCwd() != srv.workDir || s.GetCreatedAt() == nil {
		t.Fatalf("GetSession after the first turn: title %q cwd %q created %v", s.GetTitle(), s.GetCwd(), s.GetCreatedAt())
	}

	req := &pb.SetTitleRequest{SessionId: id, Title: "  Go title  ", IdempotencyKey: newKey(t)}
	set, err := srv.client.SetTitle(rpcCtx(t), req)
	if err != nil || set.GetSeq() == 0 {
		t.Fatalf("SetTitle: %v %v", set, err)
	}
	if got := srv.getSession(t, id).GetTitle(); got != "Go title" {
		t.Fatalf("GetSession title %q after SetTitle, want %q", got, "Go title")
	}
	again, err := srv.client.SetTitle(rpcCtx(t), req)
	if err != nil || again.GetSeq() != set.GetSeq() {
		t.Fatalf("SetTitle repeated with its key: %v %v, want seq %d", again, err, set.GetSeq())
	}

	if _, err := srv.client.SetTitle(rpcCtx(t), &pb.SetTitleRequest{SessionId: id}); err != nil {
		t.Fatalf("SetTitle empty: %v", err)
	}
	if got := srv.getSession(t, id).GetTitle(); got != "TEXT name me" {
		t.Fatalf("GetSession title %q after an empty SetTitle, want the derived one", got)
	}

	_, err = srv.client.SetTitle(rpcCtx(t), &pb.SetTitleRequest{SessionId: id, Title: "two\nlines"})
	wantCode(t, "SetTitle of two lines", err, codes.InvalidArgument, "title")
	_, err = srv.client.SetTitle(rpcCtx(t), &pb.SetTitleRequest{SessionId: newSessionID("nobody"), Title: "x"})
	wantCode(t, "SetTitle of an unknown session", err, codes.NotFound, "")
}
