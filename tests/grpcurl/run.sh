#!/usr/bin/env bash
# grpcurl suite: the server is usable with no .proto files at all, through gRPC reflection.
# Starts the real server release binary (interactive adapter, real claude CLI, fake Messages
# API), then: list, describe, Start, GetSession (the x-session-id header and the node header;
# /healthz), Subscribe (replay, events, caughtUp; live
# typing with include_deltas), History, GetContextUsage, ReadFullEvent, and control of a live
# session: SetModel, SetPermissionMode (and the policy's refusals), SetMaxThinkingTokens,
# RewindFiles (dry run, then for real), a fork, DeleteSession, one Codex turn (the real
# codex CLI against the fake's Responses API), ListAgents and one Gemini turn (the real
# Gemini CLI over ACP, --acp-agent, against the fake's Gemini API), and SetTitle read back
# through GetSession. Outputs are asserted with
# tests/grpcurl/check.py (stdlib Python).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
[ -f .tools/env.sh ] || ./tests/setup.sh
# shellcheck disable=SC1091
source .tools/env.sh
# A missing codex fails the suite: every client must see Codex sessions.
[ -n "${CODEX_BIN:-}" ] || { echo "FAIL: CODEX_BIN is not set: source .tools/env.sh (tests/setup.sh writes it)"; exit 1; }
# So does a missing gemini: every client must see ACP sessions.
[ -n "${GEMINI_BIN:-}" ] || { echo "FAIL: GEMINI_BIN is not set: source .tools/env.sh (tests/setup.sh writes it)"; exit 1; }
# run-all.sh has already built both binaries (cargo test builds them with the
# test feature set; rebuilding here would compile half the tree again).
[ -n "${AGENT_HARNESS_PREBUILT:-}" ] || cargo build --release --quiet -p agent-harness-server -p agent-harness-fake-api

tmp=$(mktemp -d)
mkdir -p "$tmp/home" "$tmp/work"
pids=()
cleanup() {
  local rc=$?
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ "$rc" != 0 ]; then
    echo "----- agent-harness log (tail) -----"
    tail -n 60 "$tmp/server.log" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
check() { python "$ROOT/tests/grpcurl/check.py" "$@"; }
pass=0
ok() { pass=$((pass + 1)); echo "ok: $*"; }

# The fake Messages API prints its address first (after writing the CODEX_HOME that points
# Codex at its Responses API, and the HOME that points Gemini at its Gemini API), then the
# environment Gemini needs.
"$FAKE_MESSAGES_API_BIN" --port 0 --codex-home "$tmp/codex-home" --gemini-home "$tmp/gemini-home" \
  >"$tmp/fake.out" 2>"$tmp/fake.log" &
pids+=($!)
for _ in $(seq 100); do grep -q '^gemini-env ' "$tmp/fake.out" && break; sleep 0.1; done
base_url=$(sed -n 's/^listening //p' "$tmp/fake.out")
gemini_env=$(sed -n 's/^gemini-env //p' "$tmp/fake.out")
[ -n "$base_url" ] && [ -n "$gemini_env" ] || { echo "fake-messages-api did not start"; exit 1; }

port=$(python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
addr=127.0.0.1:$port
# Nothing from this environment may point the CLI at the real API.
# On PostgreSQL when tests/run-all.sh says so: a schema of its own in the shared database.
store_args=()
if [ -n "${AGENT_HARNESS_TEST_PG_URL:-}" ]; then
  store_args=(--store-url "$AGENT_HARNESS_TEST_PG_URL?options=-c%20search_path%3Dt_$(printf %s "$tmp" | md5sum | cut -c1-16)")
fi
unset_args=()
for v in $(compgen -e | grep -E '^(ANTHROPIC_|CLAUDE_CODE_|AGENT_HARNESS_|CODEX_|OPENAI_|GEMINI_|GOOGLE_|CLAUDECODE$)' || true); do
  unset_args+=(-u "$v")
done
env "${unset_args[@]}" HOME="$tmp/home" ANTHROPIC_BASE_URL="$base_url" ANTHROPIC_API_KEY=test \
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 FAKE_API_KEY=test \
  "$AGENT_HARNESS_BIN" serve --listen "$addr" --data-dir "$tmp/data" \
  --adapter interactive --claude-bin "$CLAUDE_BIN" --allow-permission-mode acceptEdits \
  --codex-bin "$CODEX_BIN" --codex-home "$tmp/codex-home" \
  --acp-agent "gemini=env $gemini_env $GEMINI_BIN --acp" \
  "${store_args[@]}" >"$tmp/server.log" 2>&1 &
pids+=($!)

g() { grpcurl -plaintext "$@"; }
# wait_idle SID AFTER TRIES: polls GetSession every 0.1 s, at most TRIES times, until the
# session is idle with head_seq > AFTER; prints that head_seq ($tmp/get.out holds the answer).
wait_idle() {
  local status="" head=0 i
  for i in $(seq "$3"); do
    g -d "{\"session_id\":\"$1\"}" "$addr" agentharness.v1.SessionService/GetSession >"$tmp/get.out"
    read -r status head < <(check status "$tmp/get.out")
    if [ "$status" = SESSION_STATUS_IDLE ] && [ "$head" -gt "$2" ]; then
      echo "$head"
      return 0
    fi
    sleep 0.1
  done
  echo "FAIL: session $1 status $status, head_seq $head after $(($3 / 10)) s" >&2
  cat "$tmp/get.out" >&2
  return 1
}
for i in $(seq 300); do
  g "$addr" list >"$tmp/list.out" 2>/dev/null && break
  [ "$i" = 300 ] && { echo "FAIL: server not answering reflection after 30 s"; exit 1; }
  sleep 0.1
done

echo "\$ grpcurl -plaintext $addr list"
cat "$tmp/list.out"
grep -qx 'agentharness.v1.SessionService' "$tmp/list.out" || { echo "FAIL: list lacks agentharness.v1.SessionService"; exit 1; }
ok "list names agentharness.v1.SessionService"

echo "\$ grpcurl -plaintext $addr describe agentharness.v1.SessionService"
g "$addr" describe agentharness.v1.SessionService | tee "$tmp/describe.out"
for rpc in Start Send Stop History RespondPermission StopTask GetContextUsage GetSession ListSessions \
  SetModel SetPermissionMode SetMaxThinkingTokens RewindFiles DeleteSession ListAgents SetTitle; do
  grep -q "rpc $rpc ( .agentharness.v1.${rpc}Request ) returns ( .agentharness.v1.${rpc}Response );" "$tmp/describe.out" ||
    { echo "FAIL: describe lacks rpc $rpc"; exit 1; }
done
grep -q 'rpc Subscribe ( .agentharness.v1.SubscribeRequest ) returns ( stream .agentharness.v1.SubscribeResponse );' "$tmp/describe.out" ||
  { echo "FAIL: describe lacks the Subscribe stream"; exit 1; }
grep -q 'rpc ReadFullEvent ( .agentharness.v1.ReadFullEventRequest ) returns ( stream .agentharness.v1.ReadFullEventResponse );' "$tmp/describe.out" ||
  { echo "FAIL: describe lacks the ReadFullEvent stream"; exit 1; }
g "$addr" describe agentharness.v1.Event >"$tmp/event.out"
grep -q 'google.protobuf.Timestamp time = 4;' "$tmp/event.out" || { echo "FAIL: describe Event"; exit 1; }
ok "describe shows every RPC and the message types"

sid=grpcurl-$$-$RANDOM
# Every call naming a session carries it in x-session-id too (a balancer routes by it).
echo "\$ grpcurl -plaintext -H 'x-session-id: $sid' -d '{\"session_id\":\"$sid\",\"config\":{\"prompt\":\"TEXT hello from grpcurl\"}}' $addr agentharness.v1.SessionService/Start"
g -H "x-session-id: $sid" -d "{\"session_id\":\"$sid\",\"config\":{\"prompt\":\"TEXT hello from grpcurl\",\"cwd\":\"$tmp/work\"}}" \
  "$addr" agentharness.v1.SessionService/Start | tee "$tmp/start.out"
run_id=$(check start "$tmp/start.out")
ok "Start returned run $run_id"

# Wait for the turn to finish: GetSession's derived status goes back to idle.
head=$(wait_idle "$sid" 0 600)
cat "$tmp/get.out"
grep -q '"processAlive": true' "$tmp/get.out" || { echo "FAIL: process not alive after the turn"; exit 1; }
ok "GetSession: SESSION_STATUS_IDLE, head_seq $head"

# -v shows the response headers: the node that served the call; a header naming another
# session than the request is refused.
echo "\$ grpcurl -plaintext -v -H 'x-session-id: $sid' -d '{\"session_id\":\"$sid\"}' $addr agentharness.v1.SessionService/GetSession"
g -v -H "x-session-id: $sid" -d "{\"session_id\":\"$sid\"}" "$addr" agentharness.v1.SessionService/GetSession >"$tmp/routed.out"
grep -E '^x-agent-harness-node: .+' "$tmp/routed.out" || { echo "FAIL: no x-agent-harness-node response header"; cat "$tmp/routed.out"; exit 1; }
if g -H "x-session-id: someone-else" -d "{\"session_id\":\"$sid\"}" "$addr" agentharness.v1.SessionService/GetSession \
  >"$tmp/misrouted.out" 2>&1; then
  echo "FAIL: a disagreeing x-session-id was served"; exit 1
fi
grep -q 'InvalidArgument' "$tmp/misrouted.out" && grep -q 'someone-else' "$tmp/misrouted.out" ||
  { echo "FAIL: a disagreeing x-session-id:"; cat "$tmp/misrouted.out"; exit 1; }
ok "x-session-id: served when it agrees, InvalidArgument when not; the answer names its node"

echo "\$ curl -s http://$addr/healthz"
[ "$(curl -s "http://$addr/healthz")" = serving ] || { echo "FAIL: /healthz"; curl -si "http://$addr/healthz"; exit 1; }
ok "GET /healthz: serving"

echo "\$ grpcurl -plaintext -max-time 3 -d '{\"session_id\":\"$sid\"}' $addr agentharness.v1.SessionService/Subscribe"
# The stream stays open (live) after caughtUp: -max-time ends it, with DeadlineExceeded.
g -max-time 3 -d "{\"session_id\":\"$sid\"}" "$addr" agentharness.v1.SessionService/Subscribe \
  >"$tmp/sub.out" 2>"$tmp/sub.err" || true
head -n 12 "$tmp/sub.out"
echo "..."
grep -q 'DeadlineExceeded' "$tmp/sub.err" || { echo "FAIL: Subscribe ended before -max-time:"; cat "$tmp/sub.err"; exit 1; }
check subscribe "$tmp/sub.out" 0 "$head"
grep -q '"text": "hello from grpcurl"' "$tmp/sub.out" || { echo "FAIL: the answer is not in the stream"; exit 1; }
ok "Subscribe from 0: replay, events 1..$head, caughtUp, then live"

mid=$((head / 2))
g -max-time 2 -d "{\"session_id\":\"$sid\",\"after_seq\":$mid}" "$addr" agentharness.v1.SessionService/Subscribe \
  >"$tmp/sub2.out" 2>/dev/null || true
check subscribe "$tmp/sub2.out" "$mid" "$head"
ok "Subscribe from cursor $mid: events $((mid + 1))..$head only"

echo "\$ grpcurl -plaintext -d '{\"session_id\":\"$sid\",\"limit\":2}' $addr agentharness.v1.SessionService/History"
g -d "{\"session_id\":\"$sid\",\"limit\":2}" "$addr" agentharness.v1.SessionService/History >"$tmp/hist.out"
check history "$tmp/hist.out" 2 "$head"
ok "History: the newest 2 events, oldest first, hasMore"

# The live process's context window, as the CLI counts it (a control request to the CLI).
echo "\$ grpcurl -plaintext -d '{\"session_id\":\"$sid\"}' $addr agentharness.v1.SessionService/GetContextUsage"
g -d "{\"session_id\":\"$sid\"}" "$addr" agentharness.v1.SessionService/GetContextUsage >"$tmp/context.out"
python - "$tmp/context.out" <<'PY'
import json, sys
u = json.load(open(sys.argv[1]))
u.pop("raw", None)
print(json.dumps(u, indent=2))
PY
check context "$tmp/context.out"
ok "GetContextUsage: the categories add up to totalTokens"

# Live typing: a Subscribe with include_deltas, open before a SLOW turn starts, prints the
# answer as "delta" messages (fragments) before its content event; a plain Subscribe beside it
# prints none. Both streams are ended (by pid) once they hold the turn's turnEnd.
sid2=grpcurl-typing-$$-$RANDOM
echo "\$ grpcurl -plaintext -max-time 60 -d '{\"session_id\":\"$sid2\",\"include_deltas\":true}' $addr agentharness.v1.SessionService/Subscribe"
g -max-time 60 -d "{\"session_id\":\"$sid2\",\"include_deltas\":true}" "$addr" agentharness.v1.SessionService/Subscribe \
  >"$tmp/typing.out" 2>"$tmp/typing.err" &
typing_pid=$!
pids+=("$typing_pid")
g -max-time 60 -d "{\"session_id\":\"$sid2\"}" "$addr" agentharness.v1.SessionService/Subscribe \
  >"$tmp/plain.out" 2>"$tmp/plain.err" &
plain_pid=$!
pids+=("$plain_pid")
# Start only once both streams are live (caughtUp printed), so they see the whole turn.
for i in $(seq 300); do
  grep -q caughtUp "$tmp/typing.out" && grep -q caughtUp "$tmp/plain.out" && break
  [ "$i" = 300 ] && { echo "FAIL: no caughtUp on the Subscribe streams after 30 s"; cat "$tmp/typing.err" "$tmp/plain.err"; exit 1; }
  sleep 0.1
done
g -d "{\"session_id\":\"$sid2\",\"config\":{\"prompt\":\"SLOW 12 150\",\"cwd\":\"$tmp/work\"}}" \
  "$addr" agentharness.v1.SessionService/Start >/dev/null
for i in $(seq 600); do
  grep -q turnEnd "$tmp/typing.out" && grep -q turnEnd "$tmp/plain.out" && break
  [ "$i" = 600 ] && { echo "FAIL: no turnEnd on the Subscribe streams after 60 s"; cat "$tmp/typing.err" "$tmp/plain.err"; exit 1; }
  sleep 0.1
done
kill -TERM "$typing_pid" "$plain_pid" 2>/dev/null || true
wait "$typing_pid" "$plain_pid" 2>/dev/null || true
# Reaped: cleanup must not signal these pids again.
live_pids=()
for pid in "${pids[@]}"; do [ "$pid" = "$typing_pid" ] || [ "$pid" = "$plain_pid" ] || live_pids+=("$pid"); done
pids=("${live_pids[@]}")
check deltas "$tmp/typing.out"
grep -q '"delta"' "$tmp/plain.out" && { echo "FAIL: a Subscribe without include_deltas printed a delta"; exit 1; }
ok "Subscribe with include_deltas: the SLOW answer as delta fragments before its content; none without"

# A 6 MB answer: History (grpcurl's default 4 MiB receive limit) gets it cut down and marked
# "truncated"; ReadFullEvent streams the whole CLI line back (the jq | base64 pipe of docs/api.md).
g -d "{\"session_id\":\"$sid\",\"input\":\"BIG 6000000\"}" "$addr" agentharness.v1.SessionService/Send >/dev/null
wait_idle "$sid" "$head" 1200 >/dev/null
g -d "{\"session_id\":\"$sid\",\"limit\":1000}" "$addr" agentharness.v1.SessionService/History >"$tmp/big.out"
read -r big_seq line_size < <(python - "$tmp/big.out" <<'PY'
import json, sys
page = json.load(open(sys.argv[1]))
cut = [e for e in page["events"] if "truncated" in e and "content" in e]
assert cut, "no truncated content event in History"
print(cut[0]["seq"], cut[0]["truncated"]["cliLineSize"])
PY
)
echo "\$ grpcurl -plaintext -d '{\"session_id\":\"$sid\",\"seq\":$big_seq}' $addr agentharness.v1.SessionService/ReadFullEvent | jq -r .chunk | base64 -d"
g -d "{\"session_id\":\"$sid\",\"seq\":$big_seq}" "$addr" agentharness.v1.SessionService/ReadFullEvent \
  | jq -r .chunk | base64 -d >"$tmp/line.json"
python - "$tmp/line.json" "$line_size" <<'PY'
import json, os, sys
size = os.path.getsize(sys.argv[1])
assert size == int(sys.argv[2]), f"line of {size} bytes, cliLineSize {sys.argv[2]}"
line = json.load(open(sys.argv[1]))
assert line["type"] == "assistant" and len(line["message"]["content"][0]["text"]) == 6_000_000
PY
ok "a 6 MB answer: History gets it truncated (seq $big_seq), ReadFullEvent returns its $line_size-byte line whole"

# Control of a live session. This server runs with --allow-permission-mode acceptEdits: a
# client may switch to that mode (the agent's Write then runs unasked), never to
# bypassPermissions. Each change is applied to the live process and logged as settingChanged.
sid3=grpcurl-control-$$-$RANDOM
mkdir -p "$tmp/ctl"
g -d "{\"session_id\":\"$sid3\",\"config\":{\"prompt\":\"TEXT ready\",\"cwd\":\"$tmp/ctl\"}}" \
  "$addr" agentharness.v1.SessionService/Start >/dev/null
wait_idle "$sid3" 0 600 >/dev/null
# set_live RPC FIELDS SETTING VALUE: RPC on $sid3 with FIELDS in the request is applied LIVE,
# and History holds its settingChanged at the seq it answered (kept in set_seq).
set_seq=0
set_live() {
  local req="{\"session_id\":\"$sid3\",$2}"
  echo "\$ grpcurl -plaintext -d '$req' $addr agentharness.v1.SessionService/$1"
  g -d "$req" "$addr" "agentharness.v1.SessionService/$1" | tee "$tmp/set.out"
  set_seq=$(check applied "$tmp/set.out" SETTING_APPLIED_LIVE)
  g -d "{\"session_id\":\"$sid3\",\"before_seq\":$((set_seq + 1)),\"limit\":1}" \
    "$addr" agentharness.v1.SessionService/History >"$tmp/setting.out"
  check setting "$tmp/setting.out" "$set_seq" "$3" "$4" SETTING_APPLIED_LIVE
  ok "$1 $4: applied to the live process, settingChanged at seq $set_seq"
}
# refused MODE CODE: SetPermissionMode MODE fails with CODE.
refused() {
  local req="{\"session_id\":\"$sid3\",\"mode\":\"$1\"}"
  echo "\$ grpcurl -plaintext -d '$req' $addr agentharness.v1.SessionService/SetPermissionMode"
  if g -d "$req" "$addr" agentharness.v1.SessionService/SetPermissionMode >"$tmp/refused.out" 2>&1; then
    echo "FAIL: SetPermissionMode $1 was accepted:"
    cat "$tmp/refused.out"
    exit 1
  fi
  cat "$tmp/refused.out"
  grep -q "Code: $2" "$tmp/refused.out" || { echo "FAIL: SetPermissionMode $1: want $2"; exit 1; }
}
set_live SetModel '"model":"claude-haiku-4-5"' SETTING_MODEL claude-haiku-4-5
set_live SetPermissionMode '"mode":"plan"' SETTING_PERMISSION_MODE plan
plan_seq=$set_seq
refused bypassPermissions PermissionDenied
refused yolo InvalidArgument
set_live SetPermissionMode '"mode":"acceptEdits"' SETTING_PERMISSION_MODE acceptEdits
[ "$set_seq" = $((plan_seq + 1)) ] || { echo "FAIL: the refused calls were logged (seq $set_seq after $plan_seq)"; exit 1; }
ok "SetPermissionMode: bypassPermissions PermissionDenied, yolo InvalidArgument, neither logged"
set_live SetMaxThinkingTokens '"max_thinking_tokens":2048' SETTING_MAX_THINKING_TOKENS 2048
g -d "{\"session_id\":\"$sid3\"}" "$addr" agentharness.v1.SessionService/GetSession >"$tmp/get.out"
check settings "$tmp/get.out" claude-haiku-4-5 acceptEdits 2048
ok "GetSession: model, permissionMode and maxThinkingTokens in force"

# Two turns write a.txt ("first", then "second"), unasked in acceptEdits, on the new model.
g -d "{\"session_id\":\"$sid3\",\"input\":\"WRITE a.txt first\"}" "$addr" agentharness.v1.SessionService/Send >/dev/null
h1=$(wait_idle "$sid3" "$set_seq" 600)
cmp -s <(printf 'first\n') "$tmp/ctl/a.txt" || { echo "FAIL: a.txt after turn 1:"; cat "$tmp/ctl/a.txt"; exit 1; }
# Turn 1 created a.txt: the CLI's tool result holds JSON nulls ("originalFile": null), stored
# as google.protobuf.Value null_value, so grpcurl can print the events that carry them.
g -d "{\"session_id\":\"$sid3\",\"limit\":$((h1 - set_seq))}" "$addr" agentharness.v1.SessionService/History \
  >"$tmp/turn1.out" || { echo "FAIL: grpcurl could not print History of turn 1"; exit 1; }
grep -q '"originalFile": null' "$tmp/turn1.out" || { echo "FAIL: no \"originalFile\": null in turn 1"; exit 1; }
ok "History of a turn whose tool result holds JSON nulls prints (originalFile: null)"
g -d "{\"session_id\":\"$sid3\",\"input\":\"WRITE a.txt second\"}" "$addr" agentharness.v1.SessionService/Send >/dev/null
h2=$(wait_idle "$sid3" "$h1" 600)
cmp -s <(printf 'second\n') "$tmp/ctl/a.txt" || { echo "FAIL: a.txt after turn 2:"; cat "$tmp/ctl/a.txt"; exit 1; }
g -d "{\"session_id\":\"$sid3\",\"limit\":$((h2 - h1))}" "$addr" agentharness.v1.SessionService/History >"$tmp/turn.out"
turn=$(check turn "$tmp/turn.out" "WRITE a.txt second" claude-haiku-4-5)
read -r to_seq fork_at <<<"$turn"
ok "the agent wrote a.txt twice, unasked, on claude-haiku-4-5 (turn 2's inputSent at seq $to_seq)"

echo "\$ grpcurl -plaintext -d '{\"session_id\":\"$sid3\",\"to_seq\":$to_seq,\"dry_run\":true}' $addr agentharness.v1.SessionService/RewindFiles"
g -d "{\"session_id\":\"$sid3\",\"to_seq\":$to_seq,\"dry_run\":true}" "$addr" agentharness.v1.SessionService/RewindFiles \
  | tee "$tmp/rewind.out"
check rewind "$tmp/rewind.out" "$tmp/ctl/a.txt"
cmp -s <(printf 'second\n') "$tmp/ctl/a.txt" || { echo "FAIL: the dry run changed a.txt"; exit 1; }
ok "RewindFiles dry run: lists a.txt, changes nothing"
echo "\$ grpcurl -plaintext -d '{\"session_id\":\"$sid3\",\"to_seq\":$to_seq}' $addr agentharness.v1.SessionService/RewindFiles"
g -d "{\"session_id\":\"$sid3\",\"to_seq\":$to_seq}" "$addr" agentharness.v1.SessionService/RewindFiles | tee "$tmp/rewind.out"
check rewind "$tmp/rewind.out" "$tmp/ctl/a.txt" $((h2 + 1))
cmp -s <(printf 'first\n') "$tmp/ctl/a.txt" || { echo "FAIL: a.txt after RewindFiles:"; cat "$tmp/ctl/a.txt"; exit 1; }
ok "RewindFiles: a.txt holds \"first\" again (filesRewound at seq $((h2 + 1)))"

# A fork at the last answer of turn 2: a new session, a CLI conversation of its own, the
# source's settings.
sid4=$sid3-fork
echo "\$ grpcurl -plaintext -d '{\"session_id\":\"$sid4\",\"config\":{\"prompt\":\"TEXT forked\",\"fork\":{\"from_session_id\":\"$sid3\",\"at_seq\":$fork_at}}}' $addr agentharness.v1.SessionService/Start"
g -d "{\"session_id\":\"$sid4\",\"config\":{\"prompt\":\"TEXT forked\",\"fork\":{\"from_session_id\":\"$sid3\",\"at_seq\":$fork_at}}}" \
  "$addr" agentharness.v1.SessionService/Start | tee "$tmp/start.out"
check start "$tmp/start.out" >/dev/null
h4=$(wait_idle "$sid4" 0 600)
fork_resume=$(jq -r .session.resumeId "$tmp/get.out")
g -d "{\"session_id\":\"$sid4\",\"limit\":$h4}" "$addr" agentharness.v1.SessionService/History >"$tmp/fork.out"
check turn "$tmp/fork.out" "TEXT forked" claude-haiku-4-5 >/dev/null
g -d "{\"session_id\":\"$sid3\"}" "$addr" agentharness.v1.SessionService/GetSession >"$tmp/get.out"
src_resume=$(jq -r .session.resumeId "$tmp/get.out")
[ -n "$fork_resume" ] && [ "$fork_resume" != null ] && [ "$fork_resume" != "$src_resume" ] ||
  { echo "FAIL: the fork's resumeId $fork_resume, the source's $src_resume"; exit 1; }
ok "fork at seq $fork_at: answered on the source's model, in a conversation of its own"

# DeleteSession (the example in docs/api.md): the fork's run is ended, then the session is gone;
# a retry under the same key succeeds again.
del="{\"session_id\":\"$sid4\",\"idempotency_key\":\"delete-$sid4\"}"
echo "\$ grpcurl -plaintext -d '$del' $addr agentharness.v1.SessionService/DeleteSession"
g -d "$del" "$addr" agentharness.v1.SessionService/DeleteSession
g -d "$del" "$addr" agentharness.v1.SessionService/DeleteSession >/dev/null
if g -d "{\"session_id\":\"$sid4\"}" "$addr" agentharness.v1.SessionService/GetSession >"$tmp/deleted.out" 2>&1; then
  echo "FAIL: GetSession found the deleted session:"
  cat "$tmp/deleted.out"
  exit 1
fi
grep -q "Code: NotFound" "$tmp/deleted.out" || { echo "FAIL: GetSession after DeleteSession:"; cat "$tmp/deleted.out"; exit 1; }
grep -q 'session deleted' "$tmp/server.log" || { echo "FAIL: the server log does not record the deletion"; exit 1; }
ok "DeleteSession: the fork is gone (GetSession NotFound), the deletion is in the server log"

# A Codex session: the same calls with "agent":"codex"; the log and GetSession name the agent.
sid5=grpcurl-codex-$$-$RANDOM
echo "\$ grpcurl -plaintext -d '{\"session_id\":\"$sid5\",\"config\":{\"prompt\":\"TEXT hello from codex\",\"agent\":\"codex\"}}' $addr agentharness.v1.SessionService/Start"
g -d "{\"session_id\":\"$sid5\",\"config\":{\"prompt\":\"TEXT hello from codex\",\"cwd\":\"$tmp/work\",\"agent\":\"codex\"}}" \
  "$addr" agentharness.v1.SessionService/Start | tee "$tmp/start.out"
check start "$tmp/start.out" >/dev/null
h5=$(wait_idle "$sid5" 0 600)
cp "$tmp/get.out" "$tmp/codex-get.out"
g -d "{\"session_id\":\"$sid5\",\"limit\":$h5}" "$addr" agentharness.v1.SessionService/History >"$tmp/codex.out"
check codex "$tmp/codex.out" "hello from codex" "$tmp/codex-get.out"
ok "Codex: the answer from the Responses API; runStart, runReady and GetSession name agent codex; idle after turnEnd"

# The agents this server runs, then a Gemini session (the ACP agent "gemini"): the same
# calls with "agent":"gemini"; the log and GetSession name the agent.
echo "\$ grpcurl -plaintext -d '{}' $addr agentharness.v1.SessionService/ListAgents"
g -d '{}' "$addr" agentharness.v1.SessionService/ListAgents | tee "$tmp/agents.out"
check agents "$tmp/agents.out" claude:claude:default codex:codex gemini:acp
ok "ListAgents: claude (the default), codex, gemini (acp)"
sid6=grpcurl-gemini-$$-$RANDOM
echo "\$ grpcurl -plaintext -d '{\"session_id\":\"$sid6\",\"config\":{\"prompt\":\"TEXT hello from gemini\",\"agent\":\"gemini\"}}' $addr agentharness.v1.SessionService/Start"
g -d "{\"session_id\":\"$sid6\",\"config\":{\"prompt\":\"TEXT hello from gemini\",\"cwd\":\"$tmp/work\",\"agent\":\"gemini\"}}" \
  "$addr" agentharness.v1.SessionService/Start | tee "$tmp/start.out"
check start "$tmp/start.out" >/dev/null
h6=$(wait_idle "$sid6" 0 600)
cp "$tmp/get.out" "$tmp/gemini-get.out"
g -d "{\"session_id\":\"$sid6\",\"limit\":$h6}" "$addr" agentharness.v1.SessionService/History >"$tmp/gemini.out"
check agent "$tmp/gemini.out" gemini "hello from gemini" "$tmp/gemini-get.out"
ok "Gemini (ACP): the answer from the Gemini API; runStart, runReady and GetSession name agent gemini; idle after turnEnd"

# SetTitle names the first session (trimmed); GetSession reads it back with the session's cwd;
# an empty title goes back to the one derived from the first prompt.
title_req="{\"session_id\":\"$sid\",\"title\":\"  grpcurl title  \"}"
echo "\$ grpcurl -plaintext -d '$title_req' $addr agentharness.v1.SessionService/SetTitle"
g -d "$title_req" "$addr" agentharness.v1.SessionService/SetTitle | tee "$tmp/title.out"
[ "$(jq -r '.seq // 0' "$tmp/title.out")" -gt 0 ] || { echo "FAIL: SetTitle answered no seq"; exit 1; }
g -d "{\"session_id\":\"$sid\"}" "$addr" agentharness.v1.SessionService/GetSession >"$tmp/get.out"
[ "$(jq -r .session.title "$tmp/get.out")" = "grpcurl title" ] && [ "$(jq -r .session.cwd "$tmp/get.out")" = "$tmp/work" ] ||
  { echo "FAIL: GetSession after SetTitle:"; cat "$tmp/get.out"; exit 1; }
g -d "{\"session_id\":\"$sid\",\"title\":\"\"}" "$addr" agentharness.v1.SessionService/SetTitle >/dev/null
g -d "{\"session_id\":\"$sid\"}" "$addr" agentharness.v1.SessionService/GetSession >"$tmp/get.out"
[ "$(jq -r .session.title "$tmp/get.out")" = "TEXT hello from grpcurl" ] ||
  { echo "FAIL: GetSession after an empty SetTitle:"; cat "$tmp/get.out"; exit 1; }
ok "SetTitle: GetSession reads \"grpcurl title\" back, and an empty title the first prompt's"

echo "grpcurl: $pass passed, 0 failed"
