package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	pb "github.com/agent-harness/agent-harness/gen/go/agentharness/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestSendRetriedWithItsKeyRunsOnce sends one logical Send twice with the same
// idempotency_key, as a client whose answer was lost does: the retry returns the first
// run_id and the log holds one input_sent; the key with another input is INVALID_ARGUMENT.
func TestSendRetriedWithItsKeyRunsOnce(t *testing.T) {
	srv := shared
	id := newSessionID("idem")
	srv.start(t, id, "TEXT first")
	srv.waitStatus(t, id, pb.SessionStatus_SESSION_STATUS_IDLE, turnTimeout)

	ctx, cancel := context.WithTimeout(context.Background(), turnTimeout)
	defer cancel()
	req := &pb.SendRequest{SessionId: id, Input: "TEXT only once", IdempotencyKey: newKey(t)}
	first, err := srv.client.Send(ctx, req)
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	srv.waitTurns(t, id, 2)
	head := srv.getSession(t, id).GetHeadSeq()
	again, err := srv.client.Send(ctx, req)
	if err != nil {
		t.Fatalf("Send retried: %v", err)
	}
	if again.GetRunId() != first.GetRunId() {
		t.Fatalf("retry answered run %q, the first call %q", again.GetRunId(), first.GetRunId())
	}
	if got := srv.getSession(t, id).GetHeadSeq(); got != head {
		t.Fatalf("the retry appended: head %d -> %d", head, got)
	}
	page, err := srv.client.History(ctx, &pb.HistoryRequest{SessionId: id, Limit: 1000})
	if err != nil {
		t.Fatalf("History: %v", err)
	}
	inputs := 0
	for _, ev := range page.GetEvents() {
		if ev.GetInputSent().GetText() == "TEXT only once" {
			inputs++
		}
	}
	if inputs != 1 {
		t.Fatalf("%d input_sent for one logical Send, want 1", inputs)
	}
	other := &pb.SendRequest{SessionId: id, Input: "TEXT other", IdempotencyKey: req.GetIdempotencyKey()}
	_, err = srv.client.Send(ctx, other)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "idempotency_key") {
		t.Fatalf("key reused with another input: %v, want INVALID_ARGUMENT naming idempotency_key", err)
	}
}

// newKey is a fresh idempotency key, as the example makes one: 128 random bits in hex.
func newKey(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// waitTurns polls GetSession until the session is idle with at least n completed turns.
func (srv *server) waitTurns(t *testing.T, id string, n uint32) {
	t.Helper()
	deadline := time.Now().Add(turnTimeout)
	for {
		s := srv.getSession(t, id)
		if s.GetStatus() == pb.SessionStatus_SESSION_STATUS_IDLE && s.GetUsage().GetTurns() >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s: %d turns, status %v; want %d turns, idle", id, s.GetUsage().GetTurns(), s.GetStatus(), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
