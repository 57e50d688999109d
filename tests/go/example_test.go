package e2e

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	pb "github.com/agent-harness/agent-harness/gen/go/agentharness/v1"
)

// TestDocsExample runs ./example (the Go example of docs/clients.md) against the test server.
func TestDocsExample(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	id := newSessionID("example")
	out, err := exec.CommandContext(ctx, "go", "run", "./example",
		"-addr", shared.addr, "-session", id, "-prompt", "TEXT hello from the Go example").CombinedOutput()
	if err != nil {
		t.Fatalf("go run ./example: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "hello from the Go example" {
		t.Fatalf("example printed %q", got)
	}
}

// TestDocsExampleFetchesATruncatedEventWhole: a 6 MB answer is streamed cut down (over the
// server's 1 MiB per-event budget); the example fetches it with ReadFullEvent and prints it
// whole.
func TestDocsExampleFetchesATruncatedEventWhole(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	id := newSessionID("example-big")
	out, err := exec.CommandContext(ctx, "go", "run", "./example",
		"-addr", shared.addr, "-session", id, "-prompt", "BIG 6000000").Output()
	if err != nil {
		t.Fatalf("go run ./example: %v", err)
	}
	got := strings.TrimRight(string(out), "\n")
	if len(got) != 6_000_000 || !strings.HasPrefix(got, "big 0 big 1 ") {
		t.Fatalf("example printed %d bytes starting %q", len(got), got[:min(len(got), 40)])
	}
	// The same session's History, with grpc-go's default 4 MiB receive limit.
	var before uint64
	for {
		page, err := shared.client.History(ctx, &pb.HistoryRequest{SessionId: id, BeforeSeq: before, Limit: 1000})
		if err != nil {
			t.Fatalf("History: %v", err)
		}
		if !page.GetHasMore() {
			break
		}
		before = page.GetEvents()[0].GetSeq()
	}
}
