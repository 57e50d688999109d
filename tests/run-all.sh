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
  # The jemalloc build started before the tools' installation, if this run ended before it did.
  [ -z "${jemalloc_pid:-}" ] || kill "$jemalloc_pid" 2>/dev/null || true
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

# Client suites at once ("a,b" runs b after a; none writes where another reads, once gen/ts is
# built for them: see AGENT_HARNESS_GEN_TS_BUILT below). A missing run.sh fails.
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

# jemalloc, the server binary's allocator, is compiled from C by its crate's build script: a
# minute and a half, mostly on one core, that the server's crate waits for. Built here, beside
# the tools' downloads, the workspace's build finds it done (the same unit: `cargo build -p
# tikv-jemalloc-sys` resolves it as the workspace does). Only when make and a C compiler are
# already there: otherwise tests/setup.sh installs them, and the workspace's build compiles it.
# (jemalloc is not a workspace crate: clippy-driver, set up after the tools, never compiles it.)
jemalloc_log=$(mktemp)
jemalloc_pid=""
if command -v make >/dev/null 2>&1 && command -v cc >/dev/null 2>&1; then
  cargo build -p tikv-jemalloc-sys >"$jemalloc_log" 2>&1 &
  jemalloc_pid=$!
fi

step "install test tools (tests/setup.sh)"
./tests/setup.sh
# shellcheck disable=SC1091
source .tools/env.sh

# Clippy's lints in the build itself: clippy-driver, as the compiler of the workspace's crates
# (RUSTC_WORKSPACE_WRAPPER; the dependencies are compiled by rustc as usual), lints each crate
# as `cargo clippy --workspace --all-targets -- -D warnings` would, and compiles it too. One pass
# instead of two: a `cargo clippy` checked every dependency again beside the build (about three
# minutes on two cores). CLIPPY_ARGS carries the arguments `cargo clippy -- ...` would pass, in
# the form cargo-clippy passes them; clippy-driver tracks it, so a build without the same
# settings compiles the workspace's crates again. Both are exported: every cargo command below
# and in the suites finds these builds fresh.
clippy_driver=$(command -v clippy-driver || rustup which clippy-driver 2>/dev/null) ||
  { echo "no clippy-driver on PATH or in rustup's toolchain: rustup component add clippy" >&2; exit 1; }
export RUSTC_WORKSPACE_WRAPPER=$clippy_driver
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"

step "buf lint"
buf lint

step "cargo fmt --check"
cargo fmt --all -- --check

# The dev profile: from a clean clone it builds in about half the time of --release, and
# nothing in the suites depends on optimized code (speed is measured by the benchmarks,
# which build --release; see BENCHMARKS.md).
# One build of every library, binary, test, benchmark and example of the workspace: one
# feature resolution, so nothing compiles twice (Cargo.toml keeps `cargo test -p
# agent-harness-server` and `cargo test --workspace --exclude agent-harness-server` resolving
# the same features; see the comments there). The cargo test commands below and in the later
# steps then only run, and the cluster test, the throwaway PostgreSQL and the load smoke use the
# binaries built here (a `cargo build -p` of one of them would resolve the dependencies without
# the tests' features and compile about 50 of them again).
step "build every target, clippy's lints as errors (cargo build --workspace --all-targets)"
if [ -n "$jemalloc_pid" ]; then
  jemalloc_rc=0
  wait "$jemalloc_pid" || jemalloc_rc=$?
  jemalloc_pid=""
  cat "$jemalloc_log"
  [ "$jemalloc_rc" -eq 0 ] || { echo "cargo build -p tikv-jemalloc-sys failed (exit $jemalloc_rc)" >&2; exit 1; }
fi
rm -f "$jemalloc_log"
# The lint gate proven live before it is trusted: clippy-driver, called as cargo calls it, must
# refuse a crate that only clippy objects to (a `&Vec` argument) and pass the same crate fixed.
# Were CLIPPY_ARGS ever read differently, the build below would pass with clippy's warnings.
lint_probe=$(mktemp -d)
printf 'pub fn f(v: &Vec<u8>) -> usize { v.len() }\n' >"$lint_probe/lib.rs"
if "$clippy_driver" rustc --crate-type lib --edition 2021 --crate-name lint_probe --emit=metadata \
  --out-dir "$lint_probe" "$lint_probe/lib.rs" >/dev/null 2>&1; then
  echo "clippy-driver passed a crate with a clippy warning: CLIPPY_ARGS did not make it an error" >&2
  exit 1
fi
printf 'pub fn f(v: &[u8]) -> usize { v.len() }\n' >"$lint_probe/lib.rs"
"$clippy_driver" rustc --crate-type lib --edition 2021 --crate-name lint_probe --emit=metadata \
  --out-dir "$lint_probe" "$lint_probe/lib.rs" ||
  { echo "clippy-driver refused a crate clippy has nothing against" >&2; exit 1; }
rm -rf "$lint_probe"
cargo build --workspace --all-targets

# Imports in server/src point one way (store <- log <- manager <- rpc <- server); the test
# reads every `crate::` path into a module graph and names the first circle it finds.
step "module graph is acyclic (server/tests/module_graph.rs)"
cargo test -p agent-harness-server --test module_graph

# killed_owner (two server processes, the real CLI, a kill -9) runs in the cluster step;
# real_acp runs in the next step, beside the other lanes (it mostly waits: see there).
server_targets=()
for t in server/tests/*.rs server/tests/*/main.rs; do
  n=${t#server/tests/}
  n=${n%/main.rs}
  n=${n%.rs}
  case "$n" in real_acp | module_graph | real_cli) ;; *) server_targets+=(--test "$n") ;; esac
done
# Three jobs: the server's real-CLI suite (the longest), the server's other tests, the rest of
# the workspace's. Each spends most of its time waiting on real CLIs and servers (cargo takes its
# build lock only to find the builds fresh).
real_cli_tests() {
  cargo test -p agent-harness-server --test real_cli -- --skip killed_owner
}
server_tests() {
  cargo test -p agent-harness-server --lib --bins "${server_targets[@]}" || return
  cargo test -p agent-harness-server --doc
}
workspace_tests() {
  cargo test --workspace --exclude agent-harness-server -- --skip killed_owner
}
step "at once: cargo test of the server's real-CLI suite; of its other tests; of the rest of the workspace (derive vectors, session client, adapters, terminal client)"
run_at_once real_cli_tests server_tests workspace_tests

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
# started (docs/agents.md), so its tests run six at a time. Its test binary runs directly
# (from server/, as cargo test runs it), not through cargo: the packages' `cargo package` beside
# it holds cargo's build lock for minutes. The suite runs the server inside its own process,
# never the binary `cargo package` relinks.
acp_bin=$(cargo test -p agent-harness-server --test real_acp --no-run --message-format=json |
  python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "real_acp" and m.get("executable"):
        print(m["executable"])')
[ -x "$acp_bin" ] || { echo "no real_acp test binary after the build (got '$acp_bin')" >&2; exit 1; }
on_acp() {
  (cd server && "$acp_bin" --test-threads=6) || return
}
step "at once: the RPC suite and the crash loop on PostgreSQL; the real-CLI and real-Codex suites on the newest releases"
run_at_once on_postgres on_newest

# The cargo build of the test step built target/debug/agent-harness, fake-messages-api and the
# test tools' binaries; the suites use those instead of building again.
target=${CARGO_TARGET_DIR:-$ROOT/target}
for bin in agent-harness fake-messages-api agent-harness-cluster agent-harness-pg-temp agent-harness-load load-cli; do
  [ -x "$target/debug/$bin" ] || { echo "$target/debug/$bin missing after cargo build" >&2; exit 1; }
done
# The suites from here on run copies: tests/packages/run.sh, in the next step, relinks
# target/debug/agent-harness (`cargo package` verifies, `cargo install` builds).
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
# The client packages (tests/packages/run.sh: the crates packaged and `cargo install`ed, the
# npm tarball, the wheel and the Go module through a file proxy, each installed into a fresh
# project that drives a real server) beside them: the ACP suite mostly waits, and the deploy
# checks mostly download. `cargo package` relinks target/debug/agent-harness from the packaged
# sources; the next cargo test links it back from the workspace's build (the cluster step's),
# and every suite from here on runs the copies made above. The npm tarball and the wheel are
# built from copies of gen/ts and gen/python.
packages() { tests/packages/run.sh; }
# The ACP suite is not beside the PostgreSQL lane: with it, its six Gemini and Codex processes
# at a time loaded the machine enough that a cluster test's node missed its lease renewals.
step "at once: the real-ACP suite; the deploy checks (tests/deploy: unit, alerts, image); the client packages (tests/packages/run.sh)"
run_at_once on_acp on_deploy packages

# Every suite is required: a missing run.sh fails the run instead of being skipped.
step "suite: tests/gen"
tests/gen/run.sh
# gen/ts installed and built once here, for tests/ts and tests/browser at once (each would
# otherwise `npm ci` it, removing node_modules under the other) and for tests/ts on PostgreSQL.
step "gen/ts: npm ci, build (for the TypeScript and browser suites)"
(cd gen/ts && npm ci --no-audit --no-fund --loglevel=error && node build.mjs)
export AGENT_HARNESS_GEN_TS_BUILT=1
# The load tool at smoke sizes beside them (every measurement and every peer runs and every event
# arrives; no timing is asserted: BENCHMARKS.md has the real run). Each suite and the load tool
# run the copies of the server made above.
load_smoke() { tests/load/run.sh --quick; }
step "at once: suites tests/go, tests/python, tests/grpcurl, tests/ts, tests/browser; the load tool smoke (tests/load/run.sh --quick)"
run_suites_at_once go python grpcurl ts browser load_smoke

# Three nodes on one PostgreSQL behind HAProxy and nginx, both from deploy/ (docs/cluster.md).
step "cluster: tests/cluster/run.sh"
tests/cluster/run.sh

# Last, the client suites again with every server on PostgreSQL (each server a schema of its own
# in one throwaway database; the suites read AGENT_HARNESS_TEST_PG_URL). The browser suite stays
# on redb: it tests the console, not the store.
step "client suites on PostgreSQL, at once: go, python, ts, grpcurl"
pg_url_file=$(mktemp)
# Its stdin is a pipe this script holds: closed (or this script gone), the server goes.
exec {pg_in}> >(exec "$target/debug/agent-harness-pg-temp" >"$pg_url_file")
for _ in $(seq 600); do [ -s "$pg_url_file" ] && break; sleep 0.1; done
[ -s "$pg_url_file" ] || { echo "the throwaway PostgreSQL did not start" >&2; exit 1; }
AGENT_HARNESS_TEST_PG_URL=$(head -n1 "$pg_url_file")
export AGENT_HARNESS_TEST_PG_URL
run_suites_at_once go python ts grpcurl
unset AGENT_HARNESS_TEST_PG_URL AGENT_HARNESS_GEN_TS_BUILT
exec {pg_in}>&-
rm -f "$pg_url_file"

end_step
step_name=""
printf '\n==> all suites passed in %ds\n' "$SECONDS"
