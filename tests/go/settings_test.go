package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	pb "github.com/agent-harness/agent-harness/gen/go/agentharness/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// The model SetModel switches to: not the CLI's default (claude-opus-4-8), and a name the
// fake Messages API echoes in its reply, so the content event shows what the request named.
const otherModel = "claude-haiku-4-5"

// wantCode fails the test unless err is a status with code and a message containing msg.
func wantCode(t *testing.T, what string, err error, code codes.Code, msg string) {
	t.Helper()
	if status.Code(err) != code || !strings.Contains(status.Convert(err).Message(), msg) {
		t.Fatalf("%s: %v, want %v %q", what, err, code, msg)
	}
}

// rpcCtx is a context for one unary call.
func rpcCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// settingChanged checks that the first setting_changed at index from or later is the one a
// Set* call answered with (at its seq), and returns the index after it.
func (s *stream) settingChanged(from int, seq uint64, setting pb.Setting, value string, applied pb.SettingApplied) int {
	s.t.Helper()
	ev, i := s.waitEvent(from, 10*time.Second, "setting_changed", isKind("setting_changed"))
	c := ev.GetSettingChanged()
	if ev.GetSeq() != seq || c.GetSetting() != setting || c.GetValue() != value || c.GetApplied() != applied {
		s.t.Fatalf("event %d:%v, want setting_changed{%v %q %v} at seq %d", ev.GetSeq(), c, setting, value, applied, seq)
	}
	return i + 1
}

// TestSetModelOnTheLiveProcess: SetModel on an idle live process is applied LIVE and
// recorded as setting_changed at the seq it answers; a keyed repeat answers the same and
// records nothing; GetSession.model names it; the next turn, in the same process, runs on it
// (the CLI's init at that turn, run_ready, reports it, and the Messages API request named it:
// the fake API echoes the request's model in the assistant message, content.model).
func TestSetModelOnTheLiveProcess(t *testing.T) {
	srv := shared
	id := newSessionID("model")
	s := srv.subscribe(t, id, 0)
	st := srv.start(t, id, "TEXT one")
	first, j := s.waitEvent(0, turnTimeout, "content", isKind("content"))
	if m := first.GetContent().GetModel(); m == "" || m == otherModel {
		t.Fatalf("first turn on model %q: want the CLI's default, not %s", m, otherModel)
	}
	_, j = s.waitEvent(j, turnTimeout, "turn_end", isKind("turn_end"))
	srv.waitStatus(t, id, pb.SessionStatus_SESSION_STATUS_IDLE, 10*time.Second)

	req := &pb.SetModelRequest{SessionId: id, Model: otherModel, IdempotencyKey: newKey(t)}
	set, err := srv.client.SetModel(rpcCtx(t), req)
	if err != nil {
		t.Fatalf("SetModel: %v", err)
	}
	if set.GetApplied() != pb.SettingApplied_SETTING_APPLIED_LIVE || set.GetSeq() == 0 {
		t.Fatalf("SetModel on a live process: %v, want LIVE with the seq of its event", set)
	}
	j = s.settingChanged(j, set.GetSeq(), pb.Setting_SETTING_MODEL, otherModel, pb.SettingApplied_SETTING_APPLIED_LIVE)
	again, err := srv.client.SetModel(rpcCtx(t), req)
	if err != nil || !proto.Equal(again, set) {
		t.Fatalf("SetModel repeated with its key: %v %v, want the first answer %v", again, err, set)
	}
	if got := srv.getSession(t, id).GetModel(); got != otherModel {
		t.Fatalf("GetSession.model %q after SetModel, want %q", got, otherModel)
	}

	if sent := srv.send(t, id, "TEXT two"); sent.GetRunId() != st.GetRunId() {
		t.Fatalf("Send went to run %s, want the live process (run %s)", sent.GetRunId(), st.GetRunId())
	}
	ready, k := s.waitEvent(j, turnTimeout, "run_ready of the next turn", isKind("run_ready"))
	if got := ready.GetRunReady().GetModel(); got != otherModel || ready.GetRunId() != st.GetRunId() {
		t.Fatalf("the next turn's init: run %s model %q, want run %s model %q", ready.GetRunId(), got, st.GetRunId(), otherModel)
	}
	answer, k := s.waitEvent(k, turnTimeout, "content of the next turn", isKind("content"))
	if contentText(answer) != "two" || answer.GetContent().GetModel() != otherModel {
		t.Fatalf("next answer %q from model %q, want \"two\" from %q", contentText(answer), answer.GetContent().GetModel(), otherModel)
	}
	s.waitEvent(k, turnTimeout, "turn_end of the next turn", isKind("turn_end"))
	n := 0
	for _, ev := range s.events {
		if kind(ev) == "setting_changed" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d setting_changed events, want 1 (the keyed repeat records nothing): %s", n, s.summary())
	}
	if got := srv.getSession(t, id).GetModel(); got != otherModel {
		t.Fatalf("GetSession.model %q after the turn, want %q", got, otherModel)
	}
}

// TestSettingsWithNoLiveProcessApplyAtTheNextSpawn: once the process has ended (a 1 s
// --idle-timeout), SetModel and SetPermissionMode are recorded as NEXT_SPAWN; the Send that
// respawns the CLI starts it with them (run_start's config, the CLI's init, the model the
// API request named).
func TestSettingsWithNoLiveProcessApplyAtTheNextSpawn(t *testing.T) {
	srv := startTestServer(t, "--idle-timeout", "1s")
	id := newSessionID("next-spawn")
	s := srv.subscribe(t, id, 0)
	st := srv.start(t, id, "TEXT one")
	end, j := s.waitEvent(0, turnTimeout, "run_end", isKind("run_end"))
	if end.GetRunEnd().GetReason() != pb.RunEndReason_RUN_END_REASON_IDLE_TIMEOUT {
		t.Fatalf("run_end %v, want the idle timeout", end.GetRunEnd())
	}
	model, err := srv.client.SetModel(rpcCtx(t), &pb.SetModelRequest{SessionId: id, Model: otherModel})
	if err != nil || model.GetApplied() != pb.SettingApplied_SETTING_APPLIED_NEXT_SPAWN || model.GetSeq() != end.GetSeq()+1 {
		t.Fatalf("SetModel with no process: %v %v, want NEXT_SPAWN at seq %d", model, err, end.GetSeq()+1)
	}
	j = s.settingChanged(j, model.GetSeq(), pb.Setting_SETTING_MODEL, otherModel, pb.SettingApplied_SETTING_APPLIED_NEXT_SPAWN)
	mode, err := srv.client.SetPermissionMode(rpcCtx(t), &pb.SetPermissionModeRequest{SessionId: id, Mode: "plan"})
	if err != nil || mode.GetApplied() != pb.SettingApplied_SETTING_APPLIED_NEXT_SPAWN {
		t.Fatalf("SetPermissionMode with no process: %v %v, want NEXT_SPAWN", mode, err)
	}
	j = s.settingChanged(j, mode.GetSeq(), pb.Setting_SETTING_PERMISSION_MODE, "plan", pb.SettingApplied_SETTING_APPLIED_NEXT_SPAWN)
	if got := srv.getSession(t, id); got.GetModel() != otherModel || got.GetPermissionMode() != "plan" || got.GetProcessAlive() {
		t.Fatalf("GetSession with no process: %v, want model %s, permission_mode plan, no process", got, otherModel)
	}

	sent := srv.send(t, id, "TEXT two")
	if sent.GetRunId() == st.GetRunId() {
		t.Fatalf("Send with no process went to the ended run %s", st.GetRunId())
	}
	rs, j := s.waitEvent(j, turnTimeout, "the respawn's run_start", isKind("run_start"))
	if c := rs.GetRunStart().GetConfig(); c.GetModel() != otherModel || c.GetPermissionMode() != "plan" {
		t.Fatalf("the respawn's run_start config %v, want model %s and permission_mode plan", c, otherModel)
	}
	ready, j := s.waitEvent(j, turnTimeout, "the respawn's run_ready", isKind("run_ready"))
	if r := ready.GetRunReady(); r.GetModel() != otherModel || r.GetPermissionMode() != "plan" {
		t.Fatalf("the respawned CLI's init: model %q, permission_mode %q; want %s, plan", r.GetModel(), r.GetPermissionMode(), otherModel)
	}
	answer, _ := s.waitEvent(j, turnTimeout, "the answer", isKind("content"))
	if contentText(answer) != "two" || answer.GetContent().GetModel() != otherModel || answer.GetRunId() != sent.GetRunId() {
		t.Fatalf("answer %q from model %q in run %s; want \"two\" from %s in run %s",
			contentText(answer), answer.GetContent().GetModel(), answer.GetRunId(), otherModel, sent.GetRunId())
	}
}

// TestSetPermissionModeWithinThePolicy: in the default relay mode a client may switch to
// plan (LIVE, GetSession.permission_mode, and the CLI's init at the next turn says plan) but
// not to bypassPermissions or acceptEdits (PERMISSION_DENIED, naming the operator's flag);
// a mode that does not exist is INVALID_ARGUMENT; refusals record nothing.
// SetMaxThinkingTokens takes a budget (GetSession.max_thinking_tokens) within its bound.
func TestSetPermissionModeWithinThePolicy(t *testing.T) {
	srv := shared
	id := newSessionID("mode")
	s := srv.subscribe(t, id, 0)
	st := srv.start(t, id, "TEXT one")
	_, j := s.waitEvent(0, turnTimeout, "turn_end", isKind("turn_end"))
	head := srv.waitStatus(t, id, pb.SessionStatus_SESSION_STATUS_IDLE, 10*time.Second).GetHeadSeq()

	mode := func(m string) (*pb.SetPermissionModeResponse, error) {
		return srv.client.SetPermissionMode(rpcCtx(t), &pb.SetPermissionModeRequest{SessionId: id, Mode: m})
	}
	_, err := mode("bypassPermissions")
	wantCode(t, "SetPermissionMode bypassPermissions", err, codes.PermissionDenied, "--allow-permission-mode")
	_, err = mode("acceptEdits")
	wantCode(t, "SetPermissionMode acceptEdits", err, codes.PermissionDenied, "not allowed")
	_, err = mode("yolo")
	wantCode(t, "SetPermissionMode yolo", err, codes.InvalidArgument, "mode")
	_, err = mode("")
	wantCode(t, "SetPermissionMode with no mode", err, codes.InvalidArgument, "mode")

	plan, err := mode("plan")
	if err != nil {
		t.Fatalf("SetPermissionMode plan: %v", err)
	}
	if plan.GetApplied() != pb.SettingApplied_SETTING_APPLIED_LIVE || plan.GetSeq() != head+1 {
		t.Fatalf("SetPermissionMode plan: %v, want LIVE at seq %d (the refusals recorded nothing)", plan, head+1)
	}
	j = s.settingChanged(j, plan.GetSeq(), pb.Setting_SETTING_PERMISSION_MODE, "plan", pb.SettingApplied_SETTING_APPLIED_LIVE)
	if got := srv.getSession(t, id).GetPermissionMode(); got != "plan" {
		t.Fatalf("GetSession.permission_mode %q, want plan", got)
	}

	budget := func(n uint32) (*pb.SetMaxThinkingTokensResponse, error) {
		return srv.client.SetMaxThinkingTokens(rpcCtx(t), &pb.SetMaxThinkingTokensRequest{SessionId: id, MaxThinkingTokens: proto.Uint32(n)})
	}
	_, err = budget(5_000_000)
	wantCode(t, "SetMaxThinkingTokens 5000000", err, codes.InvalidArgument, "max_thinking_tokens")
	think, err := budget(2048)
	if err != nil || think.GetApplied() != pb.SettingApplied_SETTING_APPLIED_LIVE {
		t.Fatalf("SetMaxThinkingTokens 2048: %v %v, want LIVE", think, err)
	}
	j = s.settingChanged(j, think.GetSeq(), pb.Setting_SETTING_MAX_THINKING_TOKENS, "2048", pb.SettingApplied_SETTING_APPLIED_LIVE)
	got := srv.getSession(t, id)
	if got.MaxThinkingTokens == nil || got.GetMaxThinkingTokens() != 2048 || got.GetPermissionMode() != "plan" {
		t.Fatalf("GetSession after SetMaxThinkingTokens: %v, want max_thinking_tokens 2048, permission_mode plan", got)
	}

	srv.send(t, id, "TEXT two")
	ready, k := s.waitEvent(j, turnTimeout, "run_ready of the next turn", isKind("run_ready"))
	if m := ready.GetRunReady().GetPermissionMode(); m != "plan" || ready.GetRunId() != st.GetRunId() {
		t.Fatalf("the next turn's init: run %s permission_mode %q, want run %s in plan", ready.GetRunId(), m, st.GetRunId())
	}
	answer, _ := s.waitEvent(k, turnTimeout, "content of the next turn", isKind("content"))
	if contentText(answer) != "two" {
		t.Fatalf("next answer %q, want \"two\"", contentText(answer))
	}
	if m := srv.waitStatus(t, id, pb.SessionStatus_SESSION_STATUS_IDLE, turnTimeout).GetPermissionMode(); m != "plan" {
		t.Fatalf("GetSession.permission_mode %q after the turn, want plan", m)
	}
}

// readFile returns a file's content, failing the test if it cannot be read.
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRewindFilesRestoresAWrittenFile: with --permissions skip the agent writes a.txt
// unasked, "first" in turn 1 and "second" in turn 2. RewindFiles to turn 2's input_sent as a
// dry run lists a.txt and changes nothing (seq 0, no event, the file still "second"); the
// real one restores "first\n" on disk and is recorded as files_rewound at the seq it answers.
func TestRewindFilesRestoresAWrittenFile(t *testing.T) {
	srv := startTestServer(t, "--permissions", "skip")
	id := newSessionID("rewind")
	file := filepath.Join(srv.workDir, "a.txt")
	s := srv.subscribe(t, id, 0)
	st := srv.start(t, id, "WRITE a.txt first")
	_, j := s.waitEvent(0, turnTimeout, "turn_end of turn 1", isKind("turn_end"))
	if got := readFile(t, file); got != "first\n" {
		t.Fatalf("after turn 1 a.txt holds %q", got)
	}
	srv.send(t, id, "WRITE a.txt second")
	in2, j := s.waitEvent(j, turnTimeout, "input_sent of turn 2", isKind("input_sent"))
	if in2.GetInputSent().GetText() != "WRITE a.txt second" || in2.GetInputSent().GetMessageUuid() == "" {
		t.Fatalf("turn 2's input_sent: %v, want its text and a message_uuid", in2.GetInputSent())
	}
	_, j = s.waitEvent(j, turnTimeout, "turn_end of turn 2", isKind("turn_end"))
	if got := readFile(t, file); got != "second\n" {
		t.Fatalf("after turn 2 a.txt holds %q", got)
	}
	head := srv.waitStatus(t, id, pb.SessionStatus_SESSION_STATUS_IDLE, 10*time.Second).GetHeadSeq()

	_, err := srv.client.RewindFiles(rpcCtx(t), &pb.RewindFilesRequest{SessionId: id, ToSeq: head, DryRun: true})
	wantCode(t, "RewindFiles to a turn_end", err, codes.InvalidArgument, "to_seq")

	dry, err := srv.client.RewindFiles(rpcCtx(t), &pb.RewindFilesRequest{SessionId: id, ToSeq: in2.GetSeq(), DryRun: true})
	if err != nil {
		t.Fatalf("RewindFiles dry run: %v", err)
	}
	if !slices.Equal(dry.GetFilesChanged(), []string{file}) || dry.GetSeq() != 0 ||
		dry.GetInsertions() != 1 || dry.GetDeletions() != 1 {
		t.Fatalf("dry run: %v, want [%s] with 1 insertion and 1 deletion, seq 0", dry, file)
	}
	if got := readFile(t, file); got != "second\n" {
		t.Fatalf("the dry run changed a.txt to %q", got)
	}
	if h := srv.getSession(t, id).GetHeadSeq(); h != head {
		t.Fatalf("the dry run appended events: head_seq %d, was %d", h, head)
	}

	req := &pb.RewindFilesRequest{SessionId: id, ToSeq: in2.GetSeq(), IdempotencyKey: newKey(t)}
	done, err := srv.client.RewindFiles(rpcCtx(t), req)
	if err != nil {
		t.Fatalf("RewindFiles: %v", err)
	}
	if !slices.Equal(done.GetFilesChanged(), dry.GetFilesChanged()) || done.GetSeq() != head+1 {
		t.Fatalf("RewindFiles: %v, want the dry run's files, recorded at seq %d", done, head+1)
	}
	if got := readFile(t, file); got != "first\n" {
		t.Fatalf("after RewindFiles a.txt holds %q, want \"first\\n\"", got)
	}
	ev, _ := s.waitEvent(j, 10*time.Second, "files_rewound", isKind("files_rewound"))
	fr := ev.GetFilesRewound()
	if ev.GetSeq() != done.GetSeq() || fr.GetToSeq() != in2.GetSeq() || fr.GetMessageUuid() != in2.GetInputSent().GetMessageUuid() ||
		!slices.Equal(fr.GetFilesChanged(), []string{file}) || fr.GetInsertions() != 1 || fr.GetDeletions() != 1 {
		t.Fatalf("event %d files_rewound %v, want seq %d, to_seq %d, uuid %s, [%s] +1 -1",
			ev.GetSeq(), fr, done.GetSeq(), in2.GetSeq(), in2.GetInputSent().GetMessageUuid(), file)
	}
	again, err := srv.client.RewindFiles(rpcCtx(t), req)
	if err != nil || !proto.Equal(again, done) {
		t.Fatalf("RewindFiles repeated with its key: %v %v, want the first answer %v", again, err, done)
	}
	if after := srv.getSession(t, id); after.GetHeadSeq() != done.GetSeq() || !after.GetProcessAlive() || after.GetRunId() != st.GetRunId() {
		t.Fatalf("after the rewind: %v, want head_seq %d and run %s still alive", after, done.GetSeq(), st.GetRunId())
	}
}

// apiMessages is the conversation of the latest Messages API call whose messages mention
// needle, as the fake API recorded it (FAKE_MESSAGES_API_DUMP_DIR): the JSON of its
// "messages".
func apiMessages(t *testing.T, needle string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(fakeDumpDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files) // <port>-<n, zero-padded>.json: in the order the fake API got them
	for i := len(files) - 1; i >= 0; i-- {
		var req struct {
			Body struct {
				Messages json.RawMessage `json:"messages"`
			} `json:"body"`
		}
		if err := json.Unmarshal([]byte(readFile(t, files[i])), &req); err != nil {
			continue // another kind of request
		}
		if msgs := string(req.Body.Messages); strings.Contains(msgs, needle) {
			return msgs
		}
	}
	t.Fatalf("no Messages API call mentions %q (%d recorded)", needle, len(files))
	return ""
}

// TestForkAtAnEarlierMessage: a source session says alpha, then beta; a new session started
// with fork{from_session_id, at_seq: the content event "alpha"} answers gamma in a CLI
// conversation of its own (another resume id) that holds alpha but not beta; the source
// goes on in its own process and conversation (beta, no gamma).
func TestForkAtAnEarlierMessage(t *testing.T) {
	srv := shared
	src := newSessionID("fork-src")
	alpha, beta, gamma, delta := "alpha-"+src, "beta-"+src, "gamma-"+src, "delta-"+src
	s := srv.subscribe(t, src, 0)
	st := srv.start(t, src, "TEXT "+alpha)
	srcReady, _ := s.waitEvent(0, turnTimeout, "run_ready", isKind("run_ready"))
	at, j := s.waitEvent(0, turnTimeout, "content alpha", func(ev *pb.Event) bool { return contentText(ev) == alpha })
	end1, j := s.waitEvent(j, turnTimeout, "turn_end", isKind("turn_end"))
	srv.send(t, src, "TEXT "+beta)
	_, j = s.waitEvent(j, turnTimeout, "content beta", func(ev *pb.Event) bool { return contentText(ev) == beta })
	_, j = s.waitEvent(j, turnTimeout, "turn_end", isKind("turn_end"))
	srv.waitStatus(t, src, pb.SessionStatus_SESSION_STATUS_IDLE, 10*time.Second)

	startFork := func(id string, fork *pb.Fork) (*pb.StartResponse, error) {
		return srv.client.Start(rpcCtx(t), &pb.StartRequest{SessionId: id, Config: &pb.StartConfig{
			Prompt: "TEXT " + gamma, Cwd: srv.workDir, Fork: fork}})
	}
	_, err := startFork(newSessionID("fork-bad"), &pb.Fork{FromSessionId: src, AtSeq: end1.GetSeq()})
	wantCode(t, "fork at a turn_end", err, codes.InvalidArgument, "config.fork.at_seq")
	_, err = startFork(newSessionID("fork-bad"), &pb.Fork{FromSessionId: newSessionID("nobody")})
	wantCode(t, "fork of an unknown session", err, codes.InvalidArgument, "config.fork.from_session_id")

	id := newSessionID("fork")
	f := srv.subscribe(t, id, 0)
	if _, err := startFork(id, &pb.Fork{FromSessionId: src, AtSeq: at.GetSeq()}); err != nil {
		t.Fatalf("Start the fork: %v", err)
	}
	rs, i := f.waitEvent(0, turnTimeout, "the fork's run_start", isKind("run_start"))
	cfg := rs.GetRunStart().GetConfig()
	if cfg.GetFork().GetFromSessionId() != src || cfg.GetFork().GetAtSeq() != at.GetSeq() || cfg.GetFork().GetMessageUuid() == "" ||
		cfg.GetResume() != srcReady.GetRunReady().GetResumeId() {
		t.Fatalf("the fork's run_start config %v: want fork of %s at %d with the message's uuid, resuming %s",
			cfg, src, at.GetSeq(), srcReady.GetRunReady().GetResumeId())
	}
	ready, i := f.waitEvent(i, turnTimeout, "the fork's run_ready", isKind("run_ready"))
	if r := ready.GetRunReady().GetResumeId(); r == "" || r == srcReady.GetRunReady().GetResumeId() {
		t.Fatalf("the fork's resume_id %q: want a conversation of its own, not the source's %q", r, srcReady.GetRunReady().GetResumeId())
	}
	answer, i := f.waitEvent(i, turnTimeout, "the fork's answer", isKind("content"))
	if contentText(answer) != gamma {
		t.Fatalf("the fork answered %q, want %q", contentText(answer), gamma)
	}
	f.waitEvent(i, turnTimeout, "the fork's turn_end", isKind("turn_end"))
	if msgs := apiMessages(t, "TEXT "+gamma); !strings.Contains(msgs, "TEXT "+alpha) || !strings.Contains(msgs, `"`+alpha+`"`) ||
		strings.Contains(msgs, beta) {
		t.Fatalf("the fork's request carried %s; want the conversation up to the answer %q and nothing of %q", msgs, alpha, beta)
	}

	if sent := srv.send(t, src, "TEXT "+delta); sent.GetRunId() != st.GetRunId() {
		t.Fatalf("Send to the source went to run %s, want its live process (run %s)", sent.GetRunId(), st.GetRunId())
	}
	s.waitEvent(j, turnTimeout, "the source's next answer", func(ev *pb.Event) bool { return contentText(ev) == delta })
	if msgs := apiMessages(t, "TEXT "+delta); !strings.Contains(msgs, beta) || strings.Contains(msgs, gamma) {
		t.Fatalf("the source's request carried %s; want its own conversation (%q, no %q)", msgs, beta, gamma)
	}
	if got := srv.getSession(t, src).GetResumeId(); got != srcReady.GetRunReady().GetResumeId() {
		t.Fatalf("the source's resume_id %q, want %q still", got, srcReady.GetRunReady().GetResumeId())
	}
}
