package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	pb "github.com/agent-harness/agent-harness/gen/go/agentharness/v1"
)

// ticks is the text `SLOW n` streams: "tick 0 tick 1 ... tick n-1 ".
func ticks(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "tick %d ", i)
	}
	return b.String()
}

// joined is what a client holds for one block after these deltas: a snapshot replaces the
// text so far, a fragment appends to it.
func joined(deltas []seenDelta) string {
	var b strings.Builder
	for _, d := range deltas {
		if d.GetSnapshot() {
			b.Reset()
		}
		b.WriteString(d.GetFragment())
	}
	return b.String()
}

// waitDeltas reads until pred holds for the deltas received so far; it fails when the turn
// ends first.
func (s *stream) waitDeltas(timeout time.Duration, what string, pred func([]seenDelta) bool) {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for !pred(s.deltas) {
		if n := len(s.events); n > 0 && (kind(s.events[n-1]) == "turn_end" || kind(s.events[n-1]) == "run_end") {
			for _, ev := range s.events {
				s.t.Logf("event %d %s: %.400s", ev.GetSeq(), kind(ev), ev.GetCliLine())
			}
			s.t.Fatalf("the turn ended before %s; deltas joined: %q; events: %s", what, joined(s.deltas), s.summary())
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("no %s within %v; deltas joined: %q; events: %s", what, timeout, joined(s.deltas), s.summary())
		}
		s.recv(time.Until(deadline))
	}
}

// textContent returns the one content event with text in s.events and its index.
func (s *stream) textContent() (*pb.Event, int) {
	s.t.Helper()
	var found *pb.Event
	at := -1
	for i, ev := range s.events {
		if kind(ev) == "content" && contentText(ev) != "" {
			if found != nil {
				s.t.Fatalf("two content events with text: %d and %d; events: %s", found.GetSeq(), ev.GetSeq(), s.summary())
			}
			found, at = ev, i
		}
	}
	if found == nil {
		s.t.Fatalf("no content event with text; events: %s", s.summary())
	}
	return found, at
}

// checkJoin asserts that got, the deltas of a block joined, is exactly the block's final text:
// the server sends a block's last fragments before its content event, also when the CLI wrote
// them in the same instant.
func checkJoin(t *testing.T, what, got, final string) {
	t.Helper()
	if got != final {
		t.Fatalf("%s: deltas join to %q, not the content text %q", what, got, final)
	}
}

// checkDeltasOf asserts that every delta on s writes the text block 0 of content (received
// before content) and that they join to its text.
func (s *stream) checkDeltasOf(name string, content *pb.Event, at int, runID string) {
	s.t.Helper()
	msgID := content.GetContent().GetMessageId()
	for i, d := range s.deltas {
		if d.GetMessageId() != msgID || d.GetIndex() != 0 || d.GetBlockType() != pb.DeltaBlockType_DELTA_BLOCK_TYPE_TEXT ||
			d.GetRunId() != runID || d.GetParentToolUseId() != "" {
			s.t.Fatalf("%s: delta %d: %v; want message %q block 0 TEXT of run %s", name, i, d.Delta, msgID, runID)
		}
		if d.events > at {
			s.t.Fatalf("%s: delta %d came after %d events, its content event is event %d: %v", name, i, d.events, at, d.Delta)
		}
	}
	checkJoin(s.t, name, joined(s.deltas), contentText(content))
}

// TestLiveTyping: a stream with include_deltas sees the answer arrive in pieces before its
// content event, pieces that join to its text; one opened mid-message gets the text
// so far as a snapshot right after caught_up, then the rest; a stream without include_deltas
// gets no delta.
func TestLiveTyping(t *testing.T) {
	id := newSessionID("typing")
	live := shared.subscribeWith(t, &pb.SubscribeRequest{SessionId: id, IncludeDeltas: true})
	live.untilCaughtUp(10 * time.Second)
	plain := shared.subscribe(t, id, 0)
	plain.untilCaughtUp(10 * time.Second)

	st := shared.start(t, id, "SLOW 12 150")
	live.waitDeltas(turnTimeout, "five ticks", func(ds []seenDelta) bool {
		return strings.Count(joined(ds), "tick") >= 5
	})

	late := shared.subscribeWith(t, &pb.SubscribeRequest{SessionId: id, IncludeDeltas: true})
	late.untilCaughtUp(10 * time.Second)

	_, endAt := live.waitEvent(0, turnTimeout, "turn_end", isKind("turn_end"))
	if end := live.events[endAt].GetTurnEnd(); end.GetIsError() {
		t.Fatalf("turn ended in error: %v", end)
	}
	content, at := live.textContent()
	if got := contentText(content); got != ticks(12) {
		t.Fatalf("content text %q, want %q", got, ticks(12))
	}
	if len(live.deltas) < 3 {
		t.Fatalf("%d deltas: the text should come in several pieces: %q", len(live.deltas), joined(live.deltas))
	}
	for i, d := range live.deltas {
		if d.GetSnapshot() {
			t.Fatalf("delta %d is a snapshot on a stream that was there before the message: %v", i, d.Delta)
		}
	}
	live.checkDeltasOf("first stream", content, at, st.GetRunId())

	// The late stream: the same log, a snapshot of the text so far right after caught_up,
	// then fragments.
	late.waitEvent(0, turnTimeout, "turn_end", isKind("turn_end"))
	lateContent, lateAt := late.textContent()
	if lateContent.GetSeq() != content.GetSeq() {
		t.Fatalf("late stream's content is seq %d, the first's %d", lateContent.GetSeq(), content.GetSeq())
	}
	if len(late.deltas) < 2 {
		t.Fatalf("late stream: %d deltas, want a snapshot then fragments: %q", len(late.deltas), joined(late.deltas))
	}
	snap := late.deltas[0]
	if !snap.GetSnapshot() || snap.sinceCaughtUp != 0 {
		t.Fatalf("late stream: first delta (after %d messages past caught_up) is not a snapshot right after caught_up: %v",
			snap.sinceCaughtUp, snap.Delta)
	}
	final := contentText(content)
	if f := snap.GetFragment(); f == "" || len(f) >= len(final) || !strings.HasPrefix(final, f) || strings.Count(f, "tick") < 5 {
		t.Fatalf("snapshot %q: want the text so far (>= 5 ticks), a proper prefix of %q", f, final)
	}
	for i, d := range late.deltas[1:] {
		if d.GetSnapshot() {
			t.Fatalf("late stream: delta %d is a second snapshot: %v", i+1, d.Delta)
		}
	}
	late.checkDeltasOf("late stream", lateContent, lateAt, st.GetRunId())

	// The plain stream read the same turn with no delta (check fails on one).
	plain.waitEvent(0, turnTimeout, "turn_end", isKind("turn_end"))
}
