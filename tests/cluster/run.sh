#!/usr/bin/env bash
# The cluster test (docs/cluster.md): PostgreSQL, HAProxy and nginx started from
# deploy/haproxy.cfg and deploy/nginx.conf, and three agent-harness nodes on
# one database, all on loopback; then every proof of tests/cluster/src/proofs.rs.
# Every process it starts ends with it.
#
#   ./tests/cluster/run.sh                 # every proof
#   ./tests/cluster/run.sh gapless kill    # the proofs whose names contain a word
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
[ -n "${AGENT_HARNESS_PREBUILT:-}" ] && [ -f .tools/env.sh ] || ./tests/setup.sh
# shellcheck disable=SC1091
source .tools/env.sh

target=${CARGO_TARGET_DIR:-$ROOT/target}
if [ -n "${AGENT_HARNESS_PREBUILT:-}" ]; then
  # tests/run-all.sh has built the server (AGENT_HARNESS_BIN).
  cargo build --quiet -p agent-harness-cluster
else
  cargo build --quiet -p agent-harness-cluster -p agent-harness-server --bins
  export AGENT_HARNESS_BIN=$target/debug/agent-harness
fi
export AGENT_HARNESS_ROOT=$ROOT
exec "$target/debug/agent-harness-cluster" "$@"
