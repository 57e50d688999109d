package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	pb "github.com/agent-harness/agent-harness/gen/go/agentharness/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// turnTimeout bounds one scripted turn: CLI boot plus a few fake API round trips.
const turnTimeout = 60 * time.Second

func newSessionID(prefix string) string {
	return fmt.Sprintf("go-%s-%d", prefix, time.Now().UnixNano())
}

func (srv *server) getSession(t *testing.T, id string) *pb.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := srv.client.GetSession(ctx, &pb.GetSessionRequest{SessionId: id})
	if err != nil {
		t.Fatalf("GetSession(%s): %v", id, err)
	}
	return resp.GetSession()
}

// waitStatus polls GetSession until its status is want; it returns the session.
func (srv *server) waitStatus(t *testing.T, id string, want pb.SessionStatus, timeout time.Duration) *pb.Session {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s := srv.getSession(t, id)
		if s.GetStatus() == want {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s status %v, want %v after %v", id, s.GetStatus(), want, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (srv *server) start(t *testing.T, id, prompt string) *pb.StartResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := srv.client.Start(ctx, &pb.StartRequest{SessionId: id, Config: &pb.StartConfig{Prompt: prompt, Cwd: srv.workDir}})
	if err != nil {
		t.Fatalf("Start(%s): %v", id, err)
	}
	if resp.GetRunId() == "" {
		t.Fatalf("Start returned an empty run_id")
	}
	return resp
}

func (srv *server) send(t *testing.T, id, input string) *pb.SendResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := srv.client.Send(ctx, &pb.SendRequest{SessionId: id, Input: input})
	if err != nil {
		t.Fatalf("Send(%s, %q): %v", id, input, err)
	}
	return resp
}

func (srv *server) stop(t *testing.T, id string) *pb.StopResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := srv.client.Stop(ctx, &pb.StopRequest{SessionId: id})
	if err != nil {
		t.Fatalf("Stop(%s): %v", id, err)
	}
	return resp
}

// idleStop calls Stop when no turn is in progress (after s has read the whole log) and checks
// that it does nothing: stopping=false, no event appended (head_seq unchanged, nothing on
// the stream), process_alive unchanged. It returns the session afterwards.
func (srv *server) idleStop(t *testing.T, s *stream, id, what string) *pb.Session {
	t.Helper()
	before := srv.getSession(t, id)
	for s.lastSeq < before.GetHeadSeq() {
		s.recv(5 * time.Second)
	}
	if before.GetStatus() != pb.SessionStatus_SESSION_STATUS_IDLE {
		t.Fatalf("%s: session not idle before Stop: %v", what, before)
	}
	if stop := srv.stop(t, id); stop.GetStopping() {
		t.Fatalf("%s: Stop with no turn in progress answered stopping=true", what)
	}
	// Anything Stop appended would be durable before it answered; the wait also gives a
	// wrongly stopped process the time to end and show up as run_end.
	s.expectNoEvent(time.Second, what)
	after := srv.getSession(t, id)
	if after.GetHeadSeq() != before.GetHeadSeq() || after.GetStatus() != pb.SessionStatus_SESSION_STATUS_IDLE ||
		after.GetProcessAlive() != before.GetProcessAlive() || after.GetRunId() != before.GetRunId() {
		t.Fatalf("%s changed the session:\nbefore %v\nafter  %v", what, before, after)
	}
	return after
}

// TestSessionLifecycle: Start, two turns, a Stop in the middle of a slow turn, following the
// log live from seq 0 and the derived status through GetSession.
func TestSessionLifecycle(t *testing.T) {
	id := newSessionID("life")

	// Subscribing before the session exists is valid: an empty replay, then live.
	s := shared.subscribe(t, id, 0)
	if s.replay.GetFromSeq() != 0 || s.replay.GetHeadSeq() != 0 || s.replay.GetReset_() {
		t.Fatalf("replay of an empty session: %v", s.replay)
	}
	s.untilCaughtUp(10 * time.Second)

	st := shared.start(t, id, "TEXT go turn one")
	// run_start is durable before Start returns, and the CLI has not announced itself yet.
	if got := shared.getSession(t, id).GetStatus(); got != pb.SessionStatus_SESSION_STATUS_STARTING &&
		got != pb.SessionStatus_SESSION_STATUS_STREAMING {
		t.Fatalf("status right after Start = %v, want STARTING (or STREAMING)", got)
	}

	end1, i1 := s.waitEvent(0, turnTimeout, "first turn_end", isKind("turn_end"))
	if s.events[0].GetSeq() != 1 || kind(s.events[0]) != "run_start" {
		t.Fatalf("first event is %d:%s, want 1:run_start", s.events[0].GetSeq(), kind(s.events[0]))
	}
	if got := s.events[0].GetRunStart().GetConfig().GetPrompt(); got != "TEXT go turn one" {
		t.Fatalf("run_start config prompt %q", got)
	}
	ready, _ := s.waitEvent(0, 0, "run_ready", isKind("run_ready"))
	if ready.GetRunReady().GetResumeId() == "" {
		t.Fatalf("run_ready without resume_id: %v", ready)
	}
	in1, _ := s.waitEvent(0, 0, "input_sent", isKind("input_sent"))
	if in1.GetInputSent().GetText() != "TEXT go turn one" || in1.GetInputSent().GetSource() != pb.InputSource_INPUT_SOURCE_INITIAL {
		t.Fatalf("first input_sent: %v", in1.GetInputSent())
	}
	c1, _ := s.waitEvent(0, 0, "content", isKind("content"))
	if contentText(c1) != "go turn one" {
		t.Fatalf("first answer %q, want %q", contentText(c1), "go turn one")
	}
	if end1.GetTurnEnd().GetIsError() {
		t.Fatalf("first turn failed: %v", end1.GetTurnEnd())
	}
	for _, ev := range s.events {
		if ev.GetRunId() != st.GetRunId() || ev.GetSessionId() != id || ev.GetTime() == nil {
			t.Fatalf("event %d:%s has run_id %q session %q time %v; want run %q session %q", ev.GetSeq(), kind(ev), ev.GetRunId(), ev.GetSessionId(), ev.GetTime(), st.GetRunId(), id)
		}
	}
	idle := shared.waitStatus(t, id, pb.SessionStatus_SESSION_STATUS_IDLE, 10*time.Second)
	if !idle.GetProcessAlive() {
		t.Fatalf("interactive process not alive between turns: %v", idle)
	}
	if idle.GetResumeId() != ready.GetRunReady().GetResumeId() || idle.GetRunId() != st.GetRunId() {
		t.Fatalf("GetSession %v disagrees with run_ready %v / run %s", idle, ready.GetRunReady(), st.GetRunId())
	}

	// A follow-up goes to the live process: same run.
	sr := shared.send(t, id, "TEXT go turn two")
	if sr.GetRunId() != st.GetRunId() {
		t.Fatalf("Send to a live process started run %q, want the live run %q", sr.GetRunId(), st.GetRunId())
	}
	in2, j := s.waitEvent(i1+1, turnTimeout, "second input_sent", isKind("input_sent"))
	if in2.GetInputSent().GetSource() != pb.InputSource_INPUT_SOURCE_USER {
		t.Fatalf("second input_sent source %v, want USER", in2.GetInputSent().GetSource())
	}
	c2, _ := s.waitEvent(j, turnTimeout, "second content", isKind("content"))
	if contentText(c2) != "go turn two" {
		t.Fatalf("second answer %q", contentText(c2))
	}
	_, i2 := s.waitEvent(j, turnTimeout, "second turn_end", isKind("turn_end"))
	shared.waitStatus(t, id, pb.SessionStatus_SESSION_STATUS_IDLE, 10*time.Second)

	// A slow turn (40 chunks 250 ms apart) is STREAMING until Stop ends it.
	shared.send(t, id, "SLOW 40 250")
	_, j = s.waitEvent(i2+1, turnTimeout, "slow input_sent", isKind("input_sent"))
	shared.waitStatus(t, id, pb.SessionStatus_SESSION_STATUS_STREAMING, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stop, err := shared.client.Stop(ctx, &pb.StopRequest{SessionId: id})
	if err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if !stop.GetStopping() {
		t.Fatalf("Stop during a streaming turn answered stopping=false")
	}
	if got := shared.getSession(t, id).GetStatus(); got != pb.SessionStatus_SESSION_STATUS_STOPPING &&
		got != pb.SessionStatus_SESSION_STATUS_IDLE {
		t.Fatalf("status right after Stop = %v, want STOPPING (or already IDLE)", got)
	}
	sreq, j := s.waitEvent(j, 10*time.Second, "stop_requested", isKind("stop_requested"))
	if sreq.GetStopRequested().GetSource() != "user" {
		t.Fatalf("stop_requested after Stop: %v, want source user", sreq.GetStopRequested())
	}
	_, j = s.waitEvent(j, 30*time.Second, "turn_end after Stop", isKind("turn_end"))
	// The interrupt ends the turn, not the process.
	if idle := shared.waitStatus(t, id, pb.SessionStatus_SESSION_STATUS_IDLE, 30*time.Second); !idle.GetProcessAlive() {
		t.Fatalf("the process did not survive an interrupted turn: %v", idle)
	}

	// Stop with no turn in progress does nothing: the keep-alive process is left alive (it
	// ends only at --idle-timeout or shutdown), and a second Stop equals the first.
	if after := shared.idleStop(t, s, id, "Stop of an idle live process"); !after.GetProcessAlive() {
		t.Fatalf("process_alive false after Stop of an idle live process: %v", after)
	}
	shared.idleStop(t, s, id, "a repeated Stop of an idle live process")

	// The process still takes the next turn: same run.
	sr = shared.send(t, id, "TEXT go after idle stop")
	if sr.GetRunId() != st.GetRunId() {
		t.Fatalf("Send after an idle Stop started run %q, want the live run %q", sr.GetRunId(), st.GetRunId())
	}
	c3, j := s.waitEvent(j+1, turnTimeout, "content after the idle Stop", isKind("content"))
	if contentText(c3) != "go after idle stop" {
		t.Fatalf("answer after the idle Stop %q", contentText(c3))
	}
	s.waitEvent(j, turnTimeout, "turn_end after the idle Stop", isKind("turn_end"))
	shared.waitStatus(t, id, pb.SessionStatus_SESSION_STATUS_IDLE, 10*time.Second)
	for _, ev := range s.events {
		if kind(ev) == "run_end" {
			t.Fatalf("run_end %d in a session whose process was never ended: %v", ev.GetSeq(), ev.GetRunEnd())
		}
	}

	// The log the stream saw is the log GetSession describes.
	time.Sleep(300 * time.Millisecond)
	final := shared.getSession(t, id)
	for s.lastSeq < final.GetHeadSeq() {
		s.recv(5 * time.Second)
	}
	if final.GetHeadSeq() != s.lastSeq {
		t.Fatalf("GetSession head_seq %d, stream saw up to %d", final.GetHeadSeq(), s.lastSeq)
	}
	if final.GetUsage().GetTurns() < 4 || final.GetUsage().GetOutputTokens() == 0 {
		t.Fatalf("usage after four turns (one interrupted): %v", final.GetUsage())
	}
	seen := map[uint64]bool{}
	for _, ev := range s.events {
		if seen[ev.GetSeq()] {
			t.Fatalf("duplicate seq %d", ev.GetSeq())
		}
		seen[ev.GetSeq()] = true
	}
	t.Logf("lifecycle log: %s", s.summary())
}

// TestSendRespawnsAfterIdleTimeout: on a server with a short --idle-timeout the idle
// keep-alive process ends by itself (run_end IDLE_TIMEOUT); then Stop does nothing, and Send
// spawns a new run that resumes the CLI session.
func TestSendRespawnsAfterIdleTimeout(t *testing.T) {
	const idleTimeout = 2 * time.Second
	srv := startTestServer(t, "--idle-timeout", idleTimeout.String())
	id := newSessionID("respawn")
	s := srv.subscribe(t, id, 0)
	st := srv.start(t, id, "TEXT go before idle")
	ready, _ := s.waitEvent(0, turnTimeout, "run_ready", isKind("run_ready"))
	if ready.GetRunReady().GetResumeId() == "" {
		t.Fatalf("run_ready without resume_id: %v", ready)
	}
	c1, j := s.waitEvent(0, turnTimeout, "content", isKind("content"))
	if contentText(c1) != "go before idle" {
		t.Fatalf("first answer %q", contentText(c1))
	}
	turnEnd, j := s.waitEvent(j, turnTimeout, "turn_end", isKind("turn_end"))
	// The keep-alive process outlives the turn until the idle timeout.
	if idle := srv.waitStatus(t, id, pb.SessionStatus_SESSION_STATUS_IDLE, idleTimeout/2); !idle.GetProcessAlive() {
		t.Fatalf("interactive process not alive right after its turn: %v", idle)
	}

	// With no turn in progress for --idle-timeout, the process is ended: stop_requested
	// (source idle), then exactly one run_end IDLE_TIMEOUT of the run.
	sreq, j := s.waitEvent(j+1, 30*time.Second, "stop_requested of the idle timeout", isKind("stop_requested"))
	if sreq.GetStopRequested().GetSource() != "idle" || sreq.GetRunId() != st.GetRunId() {
		t.Fatalf("stop_requested %v (run %s), want source idle of run %s", sreq.GetStopRequested(), sreq.GetRunId(), st.GetRunId())
	}
	// Event times are the server's append times: the timeout counts from the last activity.
	if waited := sreq.GetTime().AsTime().Sub(turnEnd.GetTime().AsTime()); waited < idleTimeout-100*time.Millisecond {
		t.Fatalf("idle timeout fired %v after the turn ended, before --idle-timeout %v", waited, idleTimeout)
	}
	end, j := s.waitEvent(j, 30*time.Second, "run_end", isKind("run_end"))
	if end.GetRunEnd().GetReason() != pb.RunEndReason_RUN_END_REASON_IDLE_TIMEOUT || end.GetRunId() != st.GetRunId() {
		t.Fatalf("run_end after the idle timeout: %v (run %s)", end.GetRunEnd(), end.GetRunId())
	}
	gone := srv.waitStatus(t, id, pb.SessionStatus_SESSION_STATUS_IDLE, 10*time.Second)
	if gone.GetProcessAlive() {
		t.Fatalf("process_alive after run_end: %v", gone)
	}
	// Stop is idempotent and accepted in any state: nothing runs now.
	srv.idleStop(t, s, id, "Stop with no process")
	srv.idleStop(t, s, id, "a repeated Stop with no process")

	// Send with no live process spawns a new run that resumes the CLI session.
	sr := srv.send(t, id, "TEXT go after respawn")
	if sr.GetRunId() == "" || sr.GetRunId() == st.GetRunId() {
		t.Fatalf("Send with no process returned run %q (the old one was %q)", sr.GetRunId(), st.GetRunId())
	}
	rs, j := s.waitEvent(j+1, turnTimeout, "run_start of the respawn", isKind("run_start"))
	if rs.GetRunStart().GetTrigger() != "send" || rs.GetRunStart().GetConfig().GetResume() != ready.GetRunReady().GetResumeId() || rs.GetRunId() != sr.GetRunId() {
		t.Fatalf("respawn run_start: %v (run %s), want trigger send resuming %s", rs.GetRunStart(), rs.GetRunId(), ready.GetRunReady().GetResumeId())
	}
	c2, j := s.waitEvent(j, turnTimeout, "respawned content", isKind("content"))
	if contentText(c2) != "go after respawn" {
		t.Fatalf("respawned answer %q", contentText(c2))
	}
	s.waitEvent(j, turnTimeout, "respawned turn_end", isKind("turn_end"))
	if got := srv.waitStatus(t, id, pb.SessionStatus_SESSION_STATUS_IDLE, 10*time.Second); got.GetRunId() != sr.GetRunId() {
		t.Fatalf("GetSession run_id %q after the respawn, want %q", got.GetRunId(), sr.GetRunId())
	}

	// The log the stream saw is the log GetSession describes.
	final := srv.getSession(t, id)
	for s.lastSeq < final.GetHeadSeq() {
		s.recv(5 * time.Second)
	}
	if final.GetHeadSeq() != s.lastSeq {
		t.Fatalf("GetSession head_seq %d, stream saw up to %d", final.GetHeadSeq(), s.lastSeq)
	}
	if final.GetUsage().GetTurns() < 2 || final.GetUsage().GetOutputTokens() == 0 {
		t.Fatalf("usage after two turns: %v", final.GetUsage())
	}
	t.Logf("respawn log: %s", s.summary())
}

// TestSubscribeFromCursorAndHistory: a Subscribe from a cursor in the middle replays exactly
// the tail, and History pages walk the whole log backwards, both identical to the live view.
func TestSubscribeFromCursorAndHistory(t *testing.T) {
	id := newSessionID("cursor")
	live := shared.subscribe(t, id, 0)
	shared.start(t, id, "TEXT cursor one")
	_, i := live.waitEvent(0, turnTimeout, "first turn_end", isKind("turn_end"))
	shared.waitStatus(t, id, pb.SessionStatus_SESSION_STATUS_IDLE, 10*time.Second)
	shared.send(t, id, "TEXT cursor two")
	live.waitEvent(i+1, turnTimeout, "second turn_end", isKind("turn_end"))
	shared.waitStatus(t, id, pb.SessionStatus_SESSION_STATUS_IDLE, 10*time.Second)
	head := shared.getSession(t, id).GetHeadSeq()
	for live.lastSeq < head {
		live.recv(10 * time.Second)
	}
	full := live.events
	if uint64(len(full)) != head || head < 6 {
		t.Fatalf("live stream has %d events, head is %d", len(full), head)
	}

	// From the middle: replay header, exactly seq mid+1..head, caught_up at head.
	mid := head / 2
	s := shared.subscribe(t, id, mid)
	if s.replay.GetReset_() || s.replay.GetFromSeq() != mid || s.replay.GetHeadSeq() != head {
		t.Fatalf("replay from %d: %v, want from_seq %d head_seq %d reset false", mid, s.replay, mid, head)
	}
	s.untilCaughtUp(10 * time.Second)
	if s.caughtUp.GetHeadSeq() != head || uint64(len(s.events)) != head-mid {
		t.Fatalf("replay from %d gave %d events, caught_up %d; want %d events up to %d", mid, len(s.events), s.caughtUp.GetHeadSeq(), head-mid, head)
	}
	for k, ev := range s.events {
		if !proto.Equal(ev, full[int(mid)+k]) {
			t.Fatalf("replayed event %d differs from the live one:\n%v\n%v", ev.GetSeq(), ev, full[int(mid)+k])
		}
	}

	// From the head: nothing to replay.
	h := shared.subscribe(t, id, head)
	h.untilCaughtUp(10 * time.Second)
	if len(h.events) != 0 || h.replay.GetReset_() {
		t.Fatalf("subscribe from head replayed %d events (reset %v)", len(h.events), h.replay.GetReset_())
	}

	// History, 3 at a time from the tail back to seq 1.
	var pages [][]*pb.Event
	before := uint64(0)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := shared.client.History(ctx, &pb.HistoryRequest{SessionId: id, BeforeSeq: before, Limit: 3})
		cancel()
		if err != nil {
			t.Fatalf("History(before %d): %v", before, err)
		}
		evs := resp.GetEvents()
		if len(evs) == 0 || len(evs) > 3 {
			t.Fatalf("History(before %d, limit 3) returned %d events", before, len(evs))
		}
		wantLast := head
		if before != 0 {
			wantLast = before - 1
		}
		for k, ev := range evs {
			if ev.GetSeq() != wantLast-uint64(len(evs)-1-k) {
				t.Fatalf("History(before %d) page seqs %v not the newest ones below the cursor, oldest first", before, seqs(evs))
			}
		}
		pages = append([][]*pb.Event{evs}, pages...)
		before = evs[0].GetSeq()
		if resp.GetHasMore() != (before > 1) {
			t.Fatalf("History has_more %v with the oldest returned seq %d", resp.GetHasMore(), before)
		}
		if !resp.GetHasMore() {
			break
		}
	}
	var all []*pb.Event
	for _, p := range pages {
		all = append(all, p...)
	}
	if len(all) != len(full) {
		t.Fatalf("History pages hold %d events, the log %d", len(all), len(full))
	}
	for k := range all {
		if !proto.Equal(all[k], full[k]) {
			t.Fatalf("History event %d differs from the live one", all[k].GetSeq())
		}
	}
}

func seqs(evs []*pb.Event) []uint64 {
	out := make([]uint64, len(evs))
	for i, ev := range evs {
		out[i] = ev.GetSeq()
	}
	return out
}

// TestErrors: the documented status codes reach a generated-client caller.
func TestErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), turnTimeout)
	defer cancel()
	_, err := shared.client.GetSession(ctx, &pb.GetSessionRequest{SessionId: newSessionID("unknown")})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("GetSession of an unknown session: %v, want NOT_FOUND", err)
	}
	_, err = shared.client.Start(ctx, &pb.StartRequest{SessionId: "not a valid id!", Config: &pb.StartConfig{}})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("Start with an invalid session id: %v, want INVALID_ARGUMENT", err)
	}

	id := newSessionID("twice")
	s := shared.subscribe(t, id, 0)
	shared.start(t, id, "TEXT started once")
	s.waitEvent(0, turnTimeout, "turn_end", isKind("turn_end"))
	_, err = shared.client.Start(ctx, &pb.StartRequest{SessionId: id, Config: &pb.StartConfig{Prompt: "TEXT again", Cwd: shared.workDir}})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("Start while the run is live: %v, want FAILED_PRECONDITION", err)
	}
}
