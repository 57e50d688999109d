#!/usr/bin/env bash
# The whole comparison (BENCHMARKS.md), on a fresh machine:
#
#   ./tests/load/run.sh            # release build, full sizes, every peer; prints the tables,
#                                  # then each performance goal judged on this run's figures
#   ./tests/load/run.sh --quick    # smoke sizes (CI): every path runs, every event arrives;
#                                  # no timing is asserted
#
# The spawn comparisons need the real CLIs: CLAUDE_BIN and CODEX_BIN (from
# .tools/env.sh; --claude-bin and --codex-bin override them).
# The throughput, fan-out and replay rows run on redb and again on a throwaway
# PostgreSQL (Debian's package, which tests/setup.sh installs).
# Further arguments go to agent-harness-load (--json FILE, --no-peers,
# --no-postgres, --store-url URL, ...).
set -euo pipefail
# --help: this header, without installing or building anything (the tool's own flags are in
# `agent-harness-load --help` once built).
for a in "$@"; do
  if [ "$a" = --help ] || [ "$a" = -h ]; then
    sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"
    exit 0
  fi
done
cd "$(dirname "$0")/../.."
ROOT=$PWD
[ -n "${AGENT_HARNESS_PREBUILT:-}" ] && [ -f .tools/env.sh ] || ./tests/setup.sh
# shellcheck disable=SC1091
source .tools/env.sh

quick=
for a in "$@"; do [ "$a" = --quick ] && quick=1; done
if [ -n "$quick" ]; then
  # The dev profile CI has already built; figures from it mean nothing.
  profile=debug
  if [ -n "${AGENT_HARNESS_PREBUILT:-}" ]; then
    # tests/run-all.sh has built both binaries, in its one build of the workspace with the
    # tests' features: `cargo build -p agent-harness-load` would resolve them without and
    # compile about 40 dependencies again.
    for bin in agent-harness-load load-cli; do
      [ -x "${CARGO_TARGET_DIR:-$ROOT/target}/debug/$bin" ] ||
        { echo "AGENT_HARNESS_PREBUILT is set but ${CARGO_TARGET_DIR:-$ROOT/target}/debug/$bin is missing" >&2; exit 1; }
    done
  else
    cargo build --quiet -p agent-harness-load -p agent-harness-server -p agent-harness-fake-api
  fi
else
  profile=release
  cargo build --release --quiet -p agent-harness-load -p agent-harness-server -p agent-harness-fake-api
fi
target=${CARGO_TARGET_DIR:-$ROOT/target}
server_bin=$target/$profile/agent-harness
# The smoke run in CI uses the server binary the suites use (tests/run-all.sh).
[ -n "$quick" ] && [ -n "${AGENT_HARNESS_PREBUILT:-}" ] && server_bin=${AGENT_HARNESS_BIN:-$server_bin}
exec "$target/$profile/agent-harness-load" \
  --server-bin "$server_bin" \
  --cli-bin "$target/$profile/load-cli" \
  "$@"
