#!/usr/bin/env bash
# TypeScript suite: installs gen/ts (@agent-harness/client) and tests/ts with
# `npm ci`, builds and typechecks the package and the tests, then runs every
# derive vector (the O(n) functions and the incremental Fold), every partial
# message vector, the session helper against a scripted client (live typing
# included), the session helper against the real
# server (release binary, interactive adapter, real claude CLI, fake Messages
# API), controlling the live session (settings, rewind, fork), readFullEvent, a 6 MB answer and the docs/clients.md example over grpc-web,
# one Codex turn (the real codex CLI against the fake Responses API) and one
# Gemini turn (the real Gemini CLI over ACP against the fake Gemini API).
# Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
# shellcheck disable=SC1091
[ -f .tools/env.sh ] && source .tools/env.sh

echo "--- cargo build --release (server, fake Messages API)"
# run-all.sh has already built both binaries (cargo test builds them with the
# test feature set; rebuilding here would compile half the tree again).
[ -n "${AGENT_HARNESS_PREBUILT:-}" ] || cargo build --release -q -p agent-harness-server -p agent-harness-fake-api

# AGENT_HARNESS_GEN_TS_BUILT: the caller (tests/run-all.sh) installed and built gen/ts for every
# suite that runs at once, so none of them reinstalls it under another.
if [ -n "${AGENT_HARNESS_GEN_TS_BUILT:-}" ]; then
  echo "--- gen/ts: typecheck (installed and built by the caller)"
  (cd gen/ts && npx tsc -p tsconfig.json --noEmit)
else
  echo "--- gen/ts: npm ci, typecheck, build"
  (cd gen/ts && npm ci --no-audit --no-fund --loglevel=error && npx tsc -p tsconfig.json --noEmit && node build.mjs)
fi

echo "--- tests/ts: npm ci, typecheck"
(cd tests/ts && npm ci --no-audit --no-fund --loglevel=error && npx tsc -p tsconfig.json --noEmit)

echo "--- tests/ts: derive vectors (functions and Fold), partial vectors, live activity and unrecorded typing, session helper (scripted, then the real server), session control, readFullEvent"
cd tests/ts
node --import tsx --test --test-concurrency=1 --test-reporter=spec vectors.test.ts partial.test.ts live.test.ts handle.test.ts session.test.ts control.test.ts full-event.test.ts codex.test.ts gemini.test.ts
