package e2e

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestReadmeExample runs ./example (the README's Go example) against the test server.
func TestReadmeExample(t *testing.T) {
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
