#!/usr/bin/env bash
# Browser proof: builds @agent-harness/client and the React page (esbuild),
# then Playwright drives headless Chromium against the real server over
# grpc-web: stream a slow turn, reload mid-turn, stop a turn. Then a server
# with a token (agent-harness token) and --allowed-origin http://app.test:PORT:
# the page from that origin streams a turn with the token, a page from
# http://evil.test:PORT reaches nothing. Live typing: the answer grows on the
# page before its content event; a reload mid-message shows the text so far
# at once. Saves tests/artifacts/browser.png and browser-typing.png.
# Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck disable=SC1091
[ -f .tools/env.sh ] && source .tools/env.sh
CHROMIUM_BIN=${CHROMIUM_BIN:-/usr/bin/chromium}
[ -x "$CHROMIUM_BIN" ] || { echo "tests/browser: $CHROMIUM_BIN missing (tests/setup.sh installs it)" >&2; exit 1; }
export CHROMIUM_BIN

echo "--- cargo build --release (server, fake Messages API)"
# run-all.sh has already built both binaries (cargo test builds them with the
# test feature set; rebuilding here would compile half the tree again).
[ -n "${AGENT_HARNESS_PREBUILT:-}" ] || cargo build --release -q -p agent-harness-server -p agent-harness-fake-api

echo "--- gen/ts: npm ci, build"
(cd gen/ts && npm ci --no-audit --no-fund --loglevel=error && node build.mjs)

echo "--- tests/browser: npm ci, typecheck, bundle the page"
cd tests/browser
npm ci --no-audit --no-fund --loglevel=error
npx tsc -p tsconfig.json --noEmit
node build.mjs

echo "--- tests/browser: Playwright + Chromium against the real server"
node --import tsx --test --test-reporter=spec browser.test.ts
