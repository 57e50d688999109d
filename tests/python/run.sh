#!/usr/bin/env bash
# Python end-to-end suite: the generated Python client (gen/python) against the real server
# release binary, the real claude CLI and the fake Messages API. See test_session.py.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -f .tools/env.sh ] || ./tests/setup.sh
# shellcheck disable=SC1091
source .tools/env.sh
# A no-op when the release binaries are fresh (tests/run-all.sh builds them before the suites).
# run-all.sh has already built both binaries (cargo test builds them with the
# test feature set; rebuilding here would compile half the tree again).
[ -n "${AGENT_HARNESS_PREBUILT:-}" ] || cargo build --release --quiet -p agent-harness-server -p agent-harness-fake-api
export PYTHONDONTWRITEBYTECODE=1
exec python -m pytest -p no:cacheprovider -v tests/python "$@"
