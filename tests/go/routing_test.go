package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	pb "github.com/agent-harness/agent-harness/gen/go/agentharness/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// TestSessionHeaderAndServingNode: a call naming its session in x-session-id is served and its
// answer names the node in x-agent-harness-node; a header that disagrees with session_id is
// INVALID_ARGUMENT naming both; an error answer names the node too.
func TestSessionHeaderAndServingNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id := newSessionID("routing")
	var header, trailer metadata.MD
	_, err := shared.client.GetSession(metadata.AppendToOutgoingContext(ctx, "x-session-id", id),
		&pb.GetSessionRequest{SessionId: id}, grpc.Header(&header), grpc.Trailer(&trailer))
	// Never started: NOT_FOUND, and still the node's name (an error comes "trailers-only": one
	// block of headers, which grpc-go hands out as trailers).
	if status.Code(err) != codes.NotFound {
		t.Fatalf("GetSession of a new id: %v", err)
	}
	nodes := append(header.Get("x-agent-harness-node"), trailer.Get("x-agent-harness-node")...)
	if len(nodes) != 1 || nodes[0] == "" {
		t.Fatalf("x-agent-harness-node in %v / %v", header, trailer)
	}
	// A served call: in its headers.
	header = nil
	if _, err := shared.client.ListSessions(ctx, &pb.ListSessionsRequest{PageSize: 1}, grpc.Header(&header)); err != nil {
		t.Fatalf("ListSessions: %v", err)
	}
	if got := header.Get("x-agent-harness-node"); len(got) != 1 || got[0] != nodes[0] {
		t.Fatalf("x-agent-harness-node of ListSessions: %v", header)
	}
	_, err = shared.client.GetSession(metadata.AppendToOutgoingContext(ctx, "x-session-id", "other"),
		&pb.GetSessionRequest{SessionId: id})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "other") ||
		!strings.Contains(err.Error(), id) {
		t.Fatalf("a disagreeing header: %v", err)
	}
}
