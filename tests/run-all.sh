#!/usr/bin/env bash
# The one test command (README): installs every tool the tests need from the
# package registries, then runs every suite. Exit code non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

step() { printf '\n==> %s\n' "$*"; }

step "install test tools (tests/setup.sh)"
./tests/setup.sh
# shellcheck disable=SC1091
source .tools/env.sh

step "buf lint"
buf lint

step "cargo fmt --check, clippy"
cargo fmt --all -- --check
cargo clippy --release --workspace --all-targets -- -D warnings

step "cargo test (Rust: derive vectors, session client, server, adapters against the real CLI)"
cargo test --release --workspace

step "release binaries for the cross-language suites"
cargo build --release -p agent-harness-server -p agent-harness-fake-api

# Every suite is required: a missing run.sh fails the run instead of being skipped.
for suite in gen go python ts grpcurl browser; do
  step "suite: tests/$suite"
  "tests/$suite/run.sh"
done

step "all suites passed"
