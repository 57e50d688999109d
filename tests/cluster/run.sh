#!/usr/bin/env bash
# The cluster test (docs/cluster.md): PostgreSQL, HAProxy and nginx started from
# deploy/haproxy.cfg and deploy/nginx.conf, and three agent-harness nodes on
# one database, all on loopback; then every proof of tests/cluster/src/proofs.rs, and the
# real-CLI takeover after kill -9 (server/tests/real_cli/killed_owner.rs).
# Every process it starts ends with it.
#
#   ./tests/cluster/run.sh                 # every proof, then the measurement at tiny sizes
#   ./tests/cluster/run.sh gapless kill    # the proofs whose names contain a word
#   ./tests/cluster/run.sh measure --release [--json FILE]  # the figures of docs/cluster.md
#   ./tests/cluster/run.sh measure --smoke # delivery asserted, timings printed only
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
[ -n "${AGENT_HARNESS_PREBUILT:-}" ] && [ -f .tools/env.sh ] || ./tests/setup.sh
# shellcheck disable=SC1091
source .tools/env.sh

target=${CARGO_TARGET_DIR:-$ROOT/target}
# `--release` (for real figures) builds and runs everything optimized.
profile=debug
args=()
for arg in "$@"; do
  if [ "$arg" = --release ]; then profile=release; else args+=("$arg"); fi
done
flags=(--quiet)
[ "$profile" = release ] && flags+=(--release)
if [ -n "${AGENT_HARNESS_PREBUILT:-}" ] && [ "$profile" = debug ]; then
  # tests/run-all.sh has built the server (AGENT_HARNESS_BIN) and this binary, in its one
  # build of the workspace with the tests' features: `cargo build -p agent-harness-cluster`
  # would resolve them without and compile about 50 dependencies again.
  [ -x "$target/debug/agent-harness-cluster" ] ||
    { echo "AGENT_HARNESS_PREBUILT is set but $target/debug/agent-harness-cluster is missing" >&2; exit 1; }
else
  cargo build "${flags[@]}" -p agent-harness-cluster -p agent-harness-server --bins
  export AGENT_HARNESS_BIN=$target/$profile/agent-harness
fi
export AGENT_HARNESS_ROOT=$ROOT
bin=$target/$profile/agent-harness-cluster
if [ ${#args[@]} -eq 0 ]; then
  # The takeover after `kill -9` with the real claude CLI (pinned and newest) on two server
  # processes and one PostgreSQL: the next Send on the other node carries the earlier
  # conversation to the model (tests/run-all.sh leaves it out of its other cargo test steps).
  # It runs first: after the cluster binary exits, its watchdogs still kill the pids it
  # recorded, and a reused pid may be one of this test's processes.
  cargo test "${flags[@]}" -p agent-harness-server --test real_cli killed_owner::
  "$bin"
  # The measurement at tiny sizes, on clusters of its own: every subscriber
  # gets every event; its timings are printed, never asserted.
  exec "$bin" measure --smoke
fi
exec "$bin" "${args[@]}"
