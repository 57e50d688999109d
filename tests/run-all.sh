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

# Runs jobs at once: each is a shell function of this script, and spends its time waiting on real
# CLIs, servers and databases more than on the CPU. Each job's output goes to a log of its own,
# printed in order once all are done, with the job's exit code and wall time; fails when any
# failed. (cargo takes its build lock only while it builds: test binaries already built run side
# by side.)
run_at_once() {
  local dir job i=0
  dir=$(mktemp -d)
  local pids=() failed=()
  for job in "$@"; do
    (
      start=$SECONDS
      rc=0
      "$job" || rc=$?
      echo "--- $job: exit $rc after $((SECONDS - start))s"
      exit "$rc"
    ) >"$dir/$job.log" 2>&1 &
    pids+=("$!")
  done
  for job in "$@"; do
    wait "${pids[$i]}" || failed+=("$job")
    i=$((i + 1))
  done
  for job in "$@"; do
    printf '\n--- %s\n' "$job"
    cat "$dir/$job.log"
  done
  rm -rf "$dir"
  if [ ${#failed[@]} -gt 0 ]; then
    echo "FAILED: ${failed[*]}" >&2
    return 1
  fi
}

# Client suites at once ("ts,browser" runs the browser suite after the TypeScript suite, as both
# rebuild gen/ts; none of the others writes where another reads). A missing run.sh fails.
suite() {
  local one
  for one in ${1//,/ }; do
    "tests/$one/run.sh" || { echo "--- tests/$one failed"; return 1; }
  done
}
# One job per suite ("suite_go", "suite_ts_browser"); an argument naming a function of this
# script is a job of its own.
run_suites_at_once() {
  local s jobs=()
  for s in "$@"; do
    if [ "$(type -t "$s")" = function ]; then
      jobs+=("$s")
    else
      eval "suite_${s//,/_}() { suite $s; }"
      jobs+=("suite_${s//,/_}")
    fi
  done
  run_at_once "${jobs[@]}"
}

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
step "cargo test (Rust: derive vectors, session client, server, adapters and the terminal client against the real CLI)"
# killed_owner (two server processes, the real CLI, a kill -9) runs in the cluster step;
# real_acp runs in the next step, beside the other lanes (it mostly waits: see there).
server_targets=()
for t in server/tests/*.rs server/tests/*/main.rs; do
  n=${t#server/tests/}
  n=${n%/main.rs}
  n=${n%.rs}
  [ "$n" = real_acp ] || server_targets+=(--test "$n")
done
# First one build of every library, binary, test and example of the workspace: one feature
# resolution, so nothing compiles twice (Cargo.toml keeps `cargo test -p agent-harness-server`
# and `cargo test --workspace --exclude agent-harness-server` resolving the same features; see
# the comments there). The cargo test commands below and in the later steps then only run, and
# the cluster test, the throwaway PostgreSQL and the load smoke use the binaries built here (a
# `cargo build -p` of one of them would resolve the dependencies without the tests' features
# and compile about 50 of them again).
cargo build --workspace --lib --bins --tests --examples
cargo test --workspace --exclude agent-harness-server -- --skip killed_owner
cargo test -p agent-harness-server --lib --bins "${server_targets[@]}" -- --skip killed_owner
cargo test -p agent-harness-server --doc

# Two lanes at once after the workspace run: the store lane (the RPC suite with every test
# server's log on PostgreSQL, one real server per test binary, started and stopped by
# server/tests/support/postgres.rs; then the crash loop, the real server binary with
# --store-url) and the newest-release lane (what works on the pinned CLIs must work on the
# newest releases too: tests/tools/newest).
# (A job runs under `||`, where `set -e` does not apply: each command's failure returns.)
on_postgres() {
  AGENT_HARNESS_TEST_STORE=postgres cargo test -p agent-harness-server --test rpc || return
  AGENT_HARNESS_TEST_STORE=postgres cargo test -p agent-harness-server --test real_cli crash_loop:: || return
}
on_newest() {
  echo "claude $("$CLAUDE_BIN_NEWEST" --version), codex $("$CODEX_BIN_NEWEST" --version)"
  CLAUDE_BIN="$CLAUDE_BIN_NEWEST" cargo test -p agent-harness-server --test real_cli -- --skip killed_owner || return
  CODEX_BIN="$CODEX_BIN_NEWEST" cargo test -p agent-harness-server --test real_codex || return
}
# The real-ACP suite (server/tests/real_acp: Gemini CLI and codex-acp over the Agent Client
# Protocol, each scenario on the pinned and the newest release) spends most of its time
# waiting: a resume of a Gemini session is held back to the minute after the session last
# started (docs/agents.md), so its tests run six at a time, in a step of their own.
on_acp() {
  cargo test -p agent-harness-server --test real_acp -- --test-threads=6 || return
}
step "at once: the RPC suite and the crash loop on PostgreSQL; the real-CLI and real-Codex suites on the newest releases"
run_at_once on_postgres on_newest

# The cargo build of the test step built target/debug/agent-harness, fake-messages-api and the
# test tools' binaries; the suites use those instead of building again.
target=${CARGO_TARGET_DIR:-$ROOT/target}
for bin in agent-harness fake-messages-api agent-harness-cluster agent-harness-pg-temp agent-harness-load load-cli; do
  [ -x "$target/debug/$bin" ] || { echo "$target/debug/$bin missing after cargo build" >&2; exit 1; }
done
# The suites run copies: the last step's tests/packages/run.sh relinks target/debug/agent-harness
# (`cargo package` verifies, `cargo install` builds) while the load smoke runs beside it.
bins=$target/run-all-bin
mkdir -p "$bins"
cp "$target/debug/agent-harness" "$target/debug/fake-messages-api" "$bins/"
export AGENT_HARNESS_PREBUILT=1
export AGENT_HARNESS_BIN="$bins/agent-harness"
export FAKE_MESSAGES_API_BIN="$bins/fake-messages-api"

# What an operator installs (docs/operations.md): the systemd unit (`systemd-analyze verify`
# and its security score), the alert rules (promtool), then the container image built from
# deploy/Containerfile with the binary cargo test built, serving a cassette. Beside the
# real-ACP suite: both mostly wait (the image on Debian's and npm's downloads).
on_deploy() {
  tests/deploy/unit.sh || return
  tests/deploy/alerts.sh || return
  tests/deploy/image.sh || return
}
# The ACP suite is not beside the PostgreSQL lane: with it, its six Gemini and Codex processes
# at a time loaded the machine enough that a cluster test's node missed its lease renewals.
step "at once: the real-ACP suite; the deploy checks (tests/deploy: unit, alerts, image)"
run_at_once on_acp on_deploy

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

# Last, at once: the load tool at smoke sizes (every measurement and every peer runs and every
# event arrives; no timing is asserted: BENCHMARKS.md has the real run) and the client packages
# (tests/packages/run.sh: the crates packaged and `cargo install`ed, the npm tarball, the wheel
# and the Go module through a file proxy, each installed into a fresh project that drives a real
# server). After the other suites: neither competes with their servers for the two cores, and
# the packages' `npm pack` rebuilds gen/ts/dist, which the TypeScript suites also build.
load_smoke() { tests/load/run.sh --quick; }
packages() { tests/packages/run.sh; }
step "at once: load tool smoke (tests/load/run.sh --quick); client packages (tests/packages/run.sh)"
run_at_once load_smoke packages

end_step
step_name=""
printf '\n==> all suites passed in %ds\n' "$SECONDS"
