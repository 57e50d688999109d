package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	pb "github.com/agent-harness/agent-harness/gen/go/agentharness/v1"
)

// kind names an event's payload ("run_start", "turn_end", ...).
func kind(ev *pb.Event) string {
	m := ev.ProtoReflect()
	f := m.WhichOneof(m.Descriptor().Oneofs().ByName("payload"))
	if f == nil {
		return "<none>"
	}
	return string(f.Name())
}

// contentText joins the text blocks of a content event.
func contentText(ev *pb.Event) string {
	var b strings.Builder
	for _, blk := range ev.GetContent().GetBlocks() {
		b.WriteString(blk.GetText())
	}
	return b.String()
}

// stream is one Subscribe call read by a goroutine. Every message it receives is checked as
// it is read: replay first, then events in strictly increasing seq without gap or duplicate
// starting at replay.from_seq+1, caught_up exactly once with head_seq = the last seq replayed;
// deltas only when asked for, only after caught_up, each with after_seq = the last event seq
// received before it.
type stream struct {
	t      *testing.T
	msgs   chan *pb.SubscribeResponse
	errs   chan error
	cancel context.CancelFunc

	replay   *pb.ReplayStart
	caughtUp *pb.CaughtUp
	lastSeq  uint64
	events   []*pb.Event

	// wantDeltas is the request's include_deltas: a delta on a stream without it fails.
	wantDeltas bool
	// deltas are the deltas received, in order.
	deltas []seenDelta
	// sinceCaughtUp counts the messages other than heartbeats received after caught_up.
	sinceCaughtUp int
}

// seenDelta is one received delta and where it came in the stream.
type seenDelta struct {
	*pb.Delta
	// events is how many events were received before it.
	events int
	// sinceCaughtUp is how many messages other than heartbeats came between caught_up and it.
	sinceCaughtUp int
}

// subscribe opens Subscribe(sessionID, afterSeq) on srv and checks its ReplayStart header.
func (srv *server) subscribe(t *testing.T, sessionID string, afterSeq uint64) *stream {
	t.Helper()
	return srv.subscribeWith(t, &pb.SubscribeRequest{SessionId: sessionID, AfterSeq: afterSeq})
}

// subscribeWith opens Subscribe(req) on srv and checks its ReplayStart header.
func (srv *server) subscribeWith(t *testing.T, req *pb.SubscribeRequest) *stream {
	t.Helper()
	sessionID, afterSeq := req.GetSessionId(), req.GetAfterSeq()
	ctx, cancel := context.WithCancel(context.Background())
	call, err := srv.client.Subscribe(ctx, req)
	if err != nil {
		cancel()
		t.Fatalf("Subscribe(%s, %d): %v", sessionID, afterSeq, err)
	}
	s := &stream{t: t, msgs: make(chan *pb.SubscribeResponse, 1024), errs: make(chan error, 1), cancel: cancel,
		wantDeltas: req.GetIncludeDeltas()}
	t.Cleanup(cancel)
	go func() {
		for {
			msg, err := call.Recv()
			if err != nil {
				s.errs <- err
				return
			}
			s.msgs <- msg
		}
	}()
	first := s.recv(20 * time.Second)
	s.replay = first.GetReplay()
	if s.replay == nil {
		t.Fatalf("first Subscribe message is not replay: %v", first)
	}
	s.lastSeq = s.replay.GetFromSeq()
	return s
}

// recv returns the next message, failing the test on a stream error or after timeout.
func (s *stream) recv(timeout time.Duration) *pb.SubscribeResponse {
	s.t.Helper()
	select {
	case msg := <-s.msgs:
		s.check(msg)
		return msg
	case err := <-s.errs:
		s.t.Fatalf("Subscribe stream ended: %v", err)
	case <-time.After(timeout):
		s.t.Fatalf("no Subscribe message within %v (last seq %d)", timeout, s.lastSeq)
	}
	return nil
}

// check applies the stream invariants to one message and records events.
func (s *stream) check(msg *pb.SubscribeResponse) {
	s.t.Helper()
	switch k := msg.GetKind().(type) {
	case *pb.SubscribeResponse_Replay:
		if s.replay != nil {
			s.t.Fatalf("second replay header: %v", k.Replay)
		}
	case *pb.SubscribeResponse_Event:
		ev := k.Event
		if ev.GetSeq() != s.lastSeq+1 {
			s.t.Fatalf("event seq %d after %d: gap or duplicate (%s)", ev.GetSeq(), s.lastSeq, kind(ev))
		}
		s.lastSeq = ev.GetSeq()
		s.events = append(s.events, ev)
	case *pb.SubscribeResponse_CaughtUp:
		if s.caughtUp != nil {
			s.t.Fatalf("second caught_up: %v", k.CaughtUp)
		}
		if k.CaughtUp.GetHeadSeq() != s.lastSeq {
			s.t.Fatalf("caught_up.head_seq %d, but the last replayed seq is %d", k.CaughtUp.GetHeadSeq(), s.lastSeq)
		}
		s.caughtUp = k.CaughtUp
		return
	case *pb.SubscribeResponse_Heartbeat:
		return
	case *pb.SubscribeResponse_Delta:
		d := k.Delta
		if !s.wantDeltas {
			s.t.Fatalf("delta on a stream without include_deltas: %v", d)
		}
		if s.caughtUp == nil {
			s.t.Fatalf("delta before caught_up: %v", d)
		}
		if d.GetAfterSeq() != s.lastSeq {
			s.t.Fatalf("delta after_seq %d, but the last event received is %d: %v", d.GetAfterSeq(), s.lastSeq, d)
		}
		s.deltas = append(s.deltas, seenDelta{Delta: d, events: len(s.events), sinceCaughtUp: s.sinceCaughtUp})
	default:
		s.t.Fatalf("Subscribe message with no kind: %v", msg)
	}
	if s.caughtUp != nil {
		s.sinceCaughtUp++
	}
}

// expectNoEvent fails the test if an event arrives within d (heartbeats are allowed): it
// proves that a call appended nothing, whatever GetSession says.
func (s *stream) expectNoEvent(d time.Duration, after string) {
	s.t.Helper()
	deadline := time.After(d)
	for {
		select {
		case msg := <-s.msgs:
			s.check(msg)
			if ev := msg.GetEvent(); ev != nil {
				s.t.Fatalf("event %d:%s appended after %s; want none", ev.GetSeq(), kind(ev), after)
			}
		case err := <-s.errs:
			s.t.Fatalf("Subscribe stream ended: %v", err)
		case <-deadline:
			return
		}
	}
}

// untilCaughtUp reads until caught_up arrives.
func (s *stream) untilCaughtUp(timeout time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for s.caughtUp == nil {
		s.recv(time.Until(deadline))
	}
}

// waitEvent reads until an event matching pred arrives (or one already recorded at index >=
// from matches) and returns it with its index in s.events.
func (s *stream) waitEvent(from int, timeout time.Duration, what string, pred func(*pb.Event) bool) (*pb.Event, int) {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for i := from; ; i++ {
		for i >= len(s.events) {
			if time.Now().After(deadline) {
				s.t.Fatalf("no %s event within %v; events: %s", what, timeout, s.summary())
			}
			s.recv(time.Until(deadline))
		}
		if pred(s.events[i]) {
			return s.events[i], i
		}
	}
}

// summary lists the recorded events as seq:kind.
func (s *stream) summary() string {
	parts := make([]string, 0, len(s.events))
	for _, ev := range s.events {
		parts = append(parts, fmt.Sprintf("%d:%s", ev.GetSeq(), kind(ev)))
	}
	return strings.Join(parts, " ")
}

// isKind matches events by payload name.
func isKind(name string) func(*pb.Event) bool {
	return func(ev *pb.Event) bool { return kind(ev) == name }
}
