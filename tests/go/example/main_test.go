package main

import (
	"context"
	"testing"

	"google.golang.org/grpc/metadata"
)

// TestForSessionSetsTheRoutingHeader: every call made with the example's context carries the
// session id in x-session-id.
func TestForSessionSetsTheRoutingHeader(t *testing.T) {
	md, ok := metadata.FromOutgoingContext(forSession(context.Background(), "s1"))
	if !ok || len(md.Get("x-session-id")) != 1 || md.Get("x-session-id")[0] != "s1" {
		t.Fatalf("outgoing metadata %v", md)
	}
}
