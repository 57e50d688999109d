#!/usr/bin/env bash
# Container image smoke test: builds deploy/Containerfile with rootful podman and checks that
# the image serves. Steps, each failing the script loudly:
#   1. podman, buildah, mmdebstrap, runc and iptables from Debian when missing (one
#      `apt-get update` first);
#   2. the base image: Debian bookworm minbase + curl by mmdebstrap, `podman import`ed as
#      localhost/agent-harness-base:bookworm (kept: built once per machine;
#      AH_REBUILD_BASE=1 builds it again);
#   3. the image, from the release binary (`cargo build --release`; with AGENT_HARNESS_PREBUILT
#      set, $AGENT_HARNESS_BIN as built) and the claude CLI at tests/tools/package.json's pin;
#   4. a container on a named volume, the token as a podman secret, port published on
#      loopback, serving a committed cassette: /healthz, the image's HEALTHCHECK, the CLI
#      inside, a Start and a Subscribe through grpcurl (by reflection, with the token);
#   5. `podman stop` (SIGTERM): exit code 0 and the server's shutdown in its log; a second
#      container on the same volume still has the session.
# runc, not Debian's default crun: crun refuses this machine's hybrid cgroup layout (v1
# controllers with a v2 mount), runc runs containers on it.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
[ -f .tools/env.sh ] || ./tests/setup.sh
# shellcheck disable=SC1091
source .tools/env.sh
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }
[ "$(id -u)" = 0 ] || fail "run as root: the smoke test uses rootful podman"
command -v grpcurl >/dev/null || fail "grpcurl not on PATH: run tests/setup.sh"

# 1. Tools.
missing=()
for tool in podman:podman buildah:buildah mmdebstrap:mmdebstrap runc:runc iptables:iptables; do
  command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing from Debian: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
pm() { podman --runtime runc "$@"; }

base=localhost/agent-harness-base:bookworm
image=localhost/agent-harness:smoke
tag=ah-smoke-$$
tmp=$(mktemp -d)
cleanup() {
  local rc=$?
  if [ "$rc" != 0 ]; then
    for c in "$tag" "$tag-2"; do
      pm logs "$c" >"$tmp/logs" 2>&1 && { echo "----- podman logs $c (tail) -----"; tail -n 40 "$tmp/logs"; }
    done
  fi
  pm rm -f -t 0 "$tag" "$tag-2" >/dev/null 2>&1 || true
  pm volume rm -f "$tag-data" >/dev/null 2>&1 || true
  pm secret rm "$tag-token" >/dev/null 2>&1 || true
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT

# 2. The base image, from Debian packages (no image registry is reachable).
if [ -n "${AH_REBUILD_BASE:-}" ] || ! pm image exists "$base"; then
  echo "building $base with mmdebstrap"
  mmdebstrap --quiet --variant=minbase --include=ca-certificates,curl \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    bookworm "$tmp/base.tar" http://deb.debian.org/debian
  pm import --quiet "$tmp/base.tar" "$base" >/dev/null
  rm -f "$tmp/base.tar"
fi
ok "base image $base"

# 3. The image. The context holds only the binary (see the Containerfile's header).
if [ -n "${AGENT_HARNESS_PREBUILT:-}" ]; then
  bin=$AGENT_HARNESS_BIN
else
  cargo build --release --quiet -p agent-harness-server --bin agent-harness
  bin=${CARGO_TARGET_DIR:-$ROOT/target}/release/agent-harness
fi
[ -x "$bin" ] || fail "no server binary at $bin"
mkdir "$tmp/ctx"
cp "$bin" "$tmp/ctx/agent-harness"
claude_version=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["dependencies"]["@anthropic-ai/claude-code"])' tests/tools/package.json)
pm build --quiet --format docker --file deploy/Containerfile --build-arg "CLAUDE_CODE_VERSION=$claude_version" \
  --secret id=ca-bundle,src=/etc/ssl/certs/ca-certificates.crt --tag "$image" "$tmp/ctx" >/dev/null
rm -rf "$tmp/ctx"
[ "$(pm image inspect --format '{{.Config.User}}' "$image")" = 10001:10001 ] || fail "image does not run as uid 10001"
# Each output is read whole before it is searched: `cmd | grep -q` under pipefail fails when grep
# exits at its first match and cmd is still writing (SIGPIPE).
volumes=$(pm image inspect --format '{{json .Config.Volumes}}' "$image")
grep -q '"/var/lib/agent-harness"' <<<"$volumes" ||
  fail "image lacks the /var/lib/agent-harness volume"
healthcheck=$(pm image inspect --format '{{json .Config.Healthcheck}}' "$image")
grep -q healthz <<<"$healthcheck" ||
  fail "image lacks the HEALTHCHECK (built without --format docker?)"
ok "built $image (claude $claude_version, $(pm image inspect --format '{{.Size}}' "$image") bytes)"

# 4. Run it on a cassette, the token as a secret the server's user alone may read.
"$bin" token --out "$tmp/token" >/dev/null
token=$(cat "$tmp/token")
pm secret create "$tag-token" "$tmp/token" >/dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
addr=127.0.0.1:$port
# This machine's sandbox lets no process raise its hard limits, and runc cannot set the
# open-file and process limits podman asks for by default (1048576, 4194304): ask for less.
limits=(--ulimit nofile=16384:16384 --ulimit nproc=16384:16384)
run_server() { # NAME: a container of the image on the smoke test's volume and port
  pm run -d --name "$1" "${limits[@]}" -p "$addr:50051" -v "$tag-data:/var/lib/agent-harness" \
    --secret "$tag-token,target=agent-harness-token,uid=10001,gid=10001,mode=0400" \
    -v "$ROOT/cassettes/plain_turn.cassette.jsonl:/cassettes/plain_turn.cassette.jsonl:ro" \
    "$image" --adapter cassette:/cassettes/plain_turn.cassette.jsonl >/dev/null
  for i in $(seq 300); do
    [ "$(curl -s "http://$addr/healthz" 2>/dev/null)" = serving ] && return 0
    [ "$(pm inspect --format '{{.State.Running}}' "$1")" = true ] || fail "container $1 exited"
    [ "$i" = 300 ] && fail "container $1: /healthz not serving after 30 s"
    sleep 0.1
  done
}
run_server "$tag"
ok "container serving: GET /healthz = serving on $addr"

pm healthcheck run "$tag" || fail "the image's HEALTHCHECK failed"
[ "$(pm inspect --format '{{.State.Health.Status}}' "$tag")" = healthy ] || fail "health status not healthy"
ok "HEALTHCHECK: healthy"

inside=$(pm exec "$tag" claude --version)
grep -qF "$claude_version (Claude Code)" <<<"$inside" || fail "claude --version in the image: $inside"
[ "$(pm exec "$tag" id -u)" = 10001 ] || fail "the server does not run as uid 10001"
ok "claude $claude_version runs in the image, as uid 10001"

g() { grpcurl -plaintext -H "authorization: Bearer $token" "$@"; }
check() { python3 "$ROOT/tests/grpcurl/check.py" "$@"; }
if grpcurl -plaintext "$addr" list >/dev/null 2>&1; then fail "a call without the token was served"; fi
sid=image-smoke-$$
g -d "{\"session_id\":\"$sid\",\"config\":{\"prompt\":\"TEXT hello from the cassette\"}}" \
  "$addr" agentharness.v1.SessionService/Start >"$tmp/start.out" || fail "Start: $(cat "$tmp/start.out")"
run_id=$(check start "$tmp/start.out")
ok "Start (token required): run $run_id"
head=0
for i in $(seq 300); do
  g -d "{\"session_id\":\"$sid\"}" "$addr" agentharness.v1.SessionService/GetSession >"$tmp/get.out"
  read -r status head < <(check status "$tmp/get.out")
  [ "$status" = SESSION_STATUS_IDLE ] && [ "$head" -gt 0 ] && break
  [ "$i" = 300 ] && fail "session $sid: $status, head_seq $head after 30 s"
  sleep 0.1
done
if g -max-time 3 -d "{\"session_id\":\"$sid\"}" "$addr" agentharness.v1.SessionService/Subscribe \
  >"$tmp/sub.out" 2>"$tmp/sub.err"; then
  fail "Subscribe ended before -max-time"
fi
grep -q DeadlineExceeded "$tmp/sub.err" || fail "Subscribe: $(cat "$tmp/sub.err")"
check subscribe "$tmp/sub.out" 0 "$head"
ok "Subscribe: the replayed turn, events 1..$head, caughtUp"

# 5. A clean stop: SIGTERM, the server's shutdown, exit 0 (not the 137 of a kill).
pm stop -t 30 "$tag" >/dev/null
[ "$(pm inspect --format '{{.State.ExitCode}}' "$tag")" = 0 ] ||
  fail "exit code $(pm inspect --format '{{.State.ExitCode}}' "$tag") after podman stop"
pm logs "$tag" >"$tmp/server.log" 2>&1
grep -q 'shutting down' "$tmp/server.log" || fail "no shutdown in the server's log"
ok "podman stop: the server shut down, exit 0"

run_server "$tag-2"
g -d "{\"session_id\":\"$sid\"}" "$addr" agentharness.v1.SessionService/GetSession >"$tmp/get2.out"
read -r status2 head2 < <(check status "$tmp/get2.out")
[ "$head2" -ge "$head" ] || fail "after a restart on the volume: head_seq $head2, was $head"
pm stop -t 30 "$tag-2" >/dev/null
[ "$(pm inspect --format '{{.State.ExitCode}}' "$tag-2")" = 0 ] || fail "second container's exit code"
ok "a new container on the volume has the session ($status2, head_seq $head2)"
echo "image smoke test: all steps passed"
