#!/usr/bin/env bash
# The one test command (README): installs every tool the tests need from the
# package registries, then runs every suite. Exit code non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

# Each step's wall time is printed when the script exits (passed or not), so a slow suite
# shows in the CI log.
timings=()
step_name=""
step_start=$SECONDS
end_step() {
  [ -n "$step_name" ] && timings+=("$(printf '%4ds  %s' $((SECONDS - step_start)) "$step_name")")
  return 0
}
step() {
  end_step
  step_name="$*"
  step_start=$SECONDS
  printf '\n==> %s\n' "$*"
}
print_timings() {
  local rc=$?
  end_step
  printf '\n==> wall time by step (total %ds, exit %d):\n' "$SECONDS" "$rc"
  printf '%s\n' "${timings[@]}"
}
trap print_timings EXIT

step "install test tools (tests/setup.sh)"
./tests/setup.sh
# shellcheck disable=SC1091
source .tools/env.sh

step "buf lint"
buf lint

step "cargo fmt --check, clippy"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings

# Imports in server/src point one way (store <- log <- manager <- rpc <- server); the test
# reads every `crate::` path into a module graph and names the first circle it finds.
step "module graph is acyclic (server/tests/module_graph.rs)"
cargo test -p agent-harness-server --test module_graph

# The dev profile: from a clean clone it builds in about half the time of --release, and
# nothing in the suites depends on optimized code (speed is measured by the benchmarks,
# which build --release; see BENCHMARKS.md).
step "cargo test (Rust: derive vectors, session client, server, adapters against the real CLI)"
# killed_owner (two server processes, the real CLI, a kill -9) runs in the cluster step.
cargo test --workspace -- --skip killed_owner

# The RPC suite again with every test server's log on PostgreSQL (one real server per test
# binary, started and stopped by server/tests/support/postgres.rs).
step "cargo test: the RPC suite on PostgreSQL (AGENT_HARNESS_TEST_STORE=postgres)"
AGENT_HARNESS_TEST_STORE=postgres cargo test -p agent-harness-server --test rpc
step "cargo test: the crash loop on PostgreSQL (the real server binary with --store-url)"
AGENT_HARNESS_TEST_STORE=postgres cargo test -p agent-harness-server --test real_cli crash_loop::

# What works on the pinned CLI must work on the newest release too (tests/tools/newest).
step "cargo test: the real-CLI suite against the newest CLI ($("$CLAUDE_BIN_NEWEST" --version))"
CLAUDE_BIN="$CLAUDE_BIN_NEWEST" cargo test -p agent-harness-server --test real_cli -- --skip killed_owner
step "cargo test: the real-Codex suite against the newest Codex ($("$CODEX_BIN_NEWEST" --version))"
CODEX_BIN="$CODEX_BIN_NEWEST" cargo test -p agent-harness-server --test real_codex
# The real-ACP suite (server/tests/real_acp: Gemini CLI over the Agent Client Protocol) runs
# every scenario against the pinned and the newest release itself (GEMINI_BIN and
# GEMINI_BIN_NEWEST from .tools/env.sh), so `cargo test --workspace` above ran it whole.

# `cargo test` built target/debug/agent-harness and fake-messages-api (integration tests
# run both binaries); the suites use those instead of building again.
target=${CARGO_TARGET_DIR:-$ROOT/target}
for bin in agent-harness fake-messages-api; do
  [ -x "$target/debug/$bin" ] || { echo "$target/debug/$bin missing after cargo test" >&2; exit 1; }
done
export AGENT_HARNESS_PREBUILT=1
export AGENT_HARNESS_BIN="$target/debug/agent-harness"
export FAKE_MESSAGES_API_BIN="$target/debug/fake-messages-api"

# Runs client suites at once: each spends its time waiting on real CLIs and servers, not on the
# CPU, and none writes where another reads ("ts,browser" runs the browser suite after the
# TypeScript suite, as both rebuild gen/ts). Each suite's output goes to a log of its own,
# printed in order once all are done, with the suite's exit code and wall time; fails when any
# failed. A missing run.sh fails too.
run_suites_at_once() {
  local dir s i=0
  dir=$(mktemp -d)
  local pids=() failed=()
  for s in "$@"; do
    (
      rc=0
      # "a,b" runs tests/a then tests/b, one after the other.
      for one in ${s//,/ }; do
        start=$SECONDS
        "tests/$one/run.sh" || rc=$?
        echo "--- tests/$one: exit $rc after $((SECONDS - start))s"
        [ "$rc" -eq 0 ] || break
      done
      exit "$rc"
    ) >"$dir/$s.log" 2>&1 &
    pids+=("$!")
  done
  for s in "$@"; do
    wait "${pids[$i]}" || failed+=("$s")
    i=$((i + 1))
  done
  for s in "$@"; do
    printf '\n--- tests/%s\n' "$s"
    cat "$dir/$s.log"
  done
  rm -rf "$dir"
  if [ ${#failed[@]} -gt 0 ]; then
    echo "FAILED: ${failed[*]}" >&2
    return 1
  fi
}

# Every suite is required: a missing run.sh fails the run instead of being skipped.
step "suite: tests/gen"
tests/gen/run.sh
step "suites at once: tests/go, tests/python, tests/grpcurl, tests/ts then tests/browser"
run_suites_at_once go python grpcurl ts,browser

# Three nodes on one PostgreSQL behind HAProxy and nginx, both from deploy/ (docs/cluster.md).
step "cluster: tests/cluster/run.sh"
tests/cluster/run.sh

# The client suites again with every server on PostgreSQL (each server a schema of its own in
# one throwaway database; the suites read AGENT_HARNESS_TEST_PG_URL). The browser suite stays on
# redb: it tests the console, not the store.
step "client suites on PostgreSQL, at once: go, python, ts, grpcurl"
cargo build --quiet -p agent-harness-pg-temp
pg_url_file=$(mktemp)
# Its stdin is a pipe this script holds: closed (or this script gone), the server goes.
exec {pg_in}> >(exec "$target/debug/agent-harness-pg-temp" >"$pg_url_file")
for _ in $(seq 600); do [ -s "$pg_url_file" ] && break; sleep 0.1; done
[ -s "$pg_url_file" ] || { echo "the throwaway PostgreSQL did not start" >&2; exit 1; }
AGENT_HARNESS_TEST_PG_URL=$(head -n1 "$pg_url_file")
export AGENT_HARNESS_TEST_PG_URL
run_suites_at_once go python ts grpcurl
unset AGENT_HARNESS_TEST_PG_URL
exec {pg_in}>&-
rm -f "$pg_url_file"

# The load tool at smoke sizes: every measurement and every peer runs and every event
# arrives; no timing is asserted (BENCHMARKS.md has the real run).
step "load tool smoke: tests/load/run.sh --quick"
tests/load/run.sh --quick

end_step
step_name=""
printf '\n==> all suites passed in %ds\n' "$SECONDS"
