#!/usr/bin/env bash
# Browser proof: builds @agent-harness/client and the React page (esbuild),
# then Playwright drives headless Chromium against the real server over
# grpc-web: stream a slow turn, reload mid-turn, stop a turn. Then a server
# with a token (agent-harness token) and --allowed-origin http://app.test:PORT:
# the page from that origin streams a turn with the token, a page from
# http://evil.test:PORT reaches nothing. Live typing: the answer grows on the
# page before its content event; a reload mid-message shows the text so far
# at once. Saves tests/artifacts/browser.png and browser-typing.png.
#
# The built-in web console (console.test.ts): first a freshness check (the
# console rebuilt from server/web/src must be byte for byte the committed
# server/web/dist the server embeds), then Chromium drives the console the
# server serves at `/`: start a session, live typing, a permission prompt
# answered with an edited input and one denied, background tasks, a
# scheduled prompt, stop (Esc, button), an image, a subagent, reload
# mid-turn, a second tab, history paging, the token prompt, a Codex session
# started from the form (its answer, the agent in header and list), a Codex
# command's output shown live under its call until its result, a Gemini
# session (the ACP agent gemini, offered from ListAgents) the same way and, on
# a server without codex, the start form showing the refusal. Saves
# tests/artifacts/console-*.png.
#
# Honest status (console-honest.test.ts): "Writing" while the answer types;
# the server killed mid-answer, the session view and the list say "status
# unknown" (the last known state greyed, with its age) and never a live
# status while it is down; restarted, the page shows the run's
# SERVER_RESTART end and the typed text the log never recorded as "not
# recorded (server restarted)" until the next message; a Bash call in
# flight shows "unknown" while down and "no result" once the restart ended
# its run. Saves
# tests/artifacts/console-disconnected.png.
#
# console-reading.test.ts: markdown (and raw HTML
# and javascript: links inert), file edits as diffs, dark mode, shortcuts, a
# phone width, and the time a 200 KB answer takes to render.
#
# console-title.test.ts: a session named by its
# first prompt, renamed from the header, the name kept across a reload and in
# the list.
#
# console-list.test.ts: the list searched, filtered, sorted and grouped by
# the server over three sessions in two working directories; saves
# tests/artifacts/console-list-filters.png and console-list-grouped.png.
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

# AGENT_HARNESS_GEN_TS_BUILT: see tests/ts/run.sh.
if [ -z "${AGENT_HARNESS_GEN_TS_BUILT:-}" ]; then
  echo "--- gen/ts: npm ci, build"
  (cd gen/ts && npm ci --no-audit --no-fund --loglevel=error && node build.mjs)
fi

echo "--- server/web: npm ci, typecheck, rebuild the console, compare with the committed dist/"
fresh=$(mktemp -d)
trap 'rm -rf "$fresh"' EXIT
(
  cd server/web
  npm ci --no-audit --no-fund --loglevel=error
  npx tsc -p tsconfig.json --noEmit
  node build.mjs --out "$fresh"
)
diff -r "$fresh" server/web/dist >/dev/null || {
  diff -rq "$fresh" server/web/dist >&2 || true
  echo "server/web/dist is stale: run 'node build.mjs' in server/web, rebuild the server, and commit dist/" >&2
  exit 1
}

echo "--- tests/browser: npm ci, typecheck, bundle the page"
cd tests/browser
npm ci --no-audit --no-fund --loglevel=error
npx tsc -p tsconfig.json --noEmit
node build.mjs

echo "--- tests/browser: Playwright + Chromium against the real server"
node --import tsx --test --test-concurrency=1 --test-reporter=spec browser.test.ts console.test.ts console-honest.test.ts console-reading.test.ts console-title.test.ts console-list.test.ts
