#!/usr/bin/env bash
# Checks the committed generated code: `buf lint`, then regenerates Go, Python and TypeScript
# into a temp dir and fails on any difference from gen/ (printing the diff), then checks that
# each generated package builds: the Go module, the Python distribution (installed into a
# temp dir and imported), and nothing for TypeScript here (tests/ts typechecks it). Last, the
# docs: their examples are the tested files, their links resolve, and so does every design
# reference a code comment makes (tests/gen/docs.py).
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -f .tools/env.sh ] || ./tests/setup.sh
# shellcheck disable=SC1091
source .tools/env.sh

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "--- buf lint"
buf lint

echo "--- regenerate into a temp dir and compare with the committed gen/"
tests/gen/generate.sh "$tmp/fresh" >/dev/null
status=0
for d in gen/go/agentharness gen/python/agentharness gen/ts/src/gen; do
  if [ ! -d "$d" ]; then
    echo "FAIL: $d is missing: run tests/gen/generate.sh"
    status=1
    continue
  fi
  if ! diff -ru --exclude=__pycache__ "$d" "$tmp/fresh/$d"; then
    echo "FAIL: $d differs from what tests/gen/generate.sh produces (diff above: committed vs fresh)"
    status=1
  fi
done
[ "$status" = 0 ] || exit 1
echo "committed gen/ is fresh"

echo "--- gen/go builds (go build, go vet; go.mod and go.sum tidy)"
(
  cd gen/go
  cp go.mod "$tmp/go.mod.before"
  cp go.sum "$tmp/go.sum.before"
  go build ./...
  go vet ./...
  go mod tidy
  diff -u "$tmp/go.mod.before" go.mod || {
    cp "$tmp/go.mod.before" go.mod
    cp "$tmp/go.sum.before" go.sum
    echo "FAIL: gen/go/go.mod is not tidy (diff above)"
    exit 1
  }
  diff -u "$tmp/go.sum.before" go.sum || {
    cp "$tmp/go.sum.before" go.sum
    echo "FAIL: gen/go/go.sum is not tidy (diff above)"
    exit 1
  }
)

echo "--- gen/python installs as a distribution and imports"
# Installed from a copy so the build leaves no build/ or egg-info in the tree.
cp -r gen/python "$tmp/pysrc"
python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation \
  --target "$tmp/site" "$tmp/pysrc"
(cd "$tmp" && PYTHONPATH="$tmp/site" python - <<'PY'
from importlib.metadata import version

from agentharness.v1 import events_pb2, session_service_pb2, session_service_pb2_grpc
from google.protobuf import struct_pb2

# Well-known types resolve: a Struct field and a Timestamp field round-trip.
ev = events_pb2.Event(seq=1)
ev.time.GetCurrentTime()
ev.content.blocks.add(type="tool_use").input.update({"command": "ls", "n": 2})
back = events_pb2.Event.FromString(ev.SerializeToString())
assert back.content.blocks[0].input["command"] == "ls", back
assert isinstance(back.content.blocks[0].input, struct_pb2.Struct)
assert back.time.seconds > 0
assert hasattr(session_service_pb2_grpc, "SessionServiceStub")
assert session_service_pb2.SessionStatus.Name(3) == "SESSION_STATUS_STREAMING"
print("agent-harness-client-gen", version("agent-harness-client-gen"), "imports ok")
PY
)
echo "--- docs: examples are the tested files, links and design citations resolve"
# README.md and docs/ show the example files byte for byte; every relative link, and every
# heading of docs/ a code comment cites, exists (tests/gen/docs.py).
python tests/gen/docs.py
echo "gen: all checks passed"
