#!/usr/bin/env bash
# Generates the Go, Python and TypeScript stubs from proto/ with buf.gen.yaml (local plugins
# installed by tests/setup.sh) into gen/, or into OUT_ROOT/gen/ when an argument is given
# (tests/gen/run.sh uses that to check that the committed stubs are fresh).
#
#   tests/gen/generate.sh            # regenerate the committed gen/
#   tests/gen/generate.sh /tmp/x     # generate into /tmp/x/gen/
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=${1:-$ROOT}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

[ -f .tools/env.sh ] || ./tests/setup.sh
# shellcheck disable=SC1091
source .tools/env.sh

# Only generated files are removed first (go.mod, pyproject.toml and the hand-written
# TypeScript outside src/gen stay), so a message or file deleted from the proto leaves
# nothing stale behind.
rm -rf "$OUT/gen/go/agentharness" "$OUT/gen/python/agentharness" "$OUT/gen/ts/src/gen"

buf generate --template buf.gen.yaml -o "$OUT"

# protoc writes modules, not packages: add the package markers that make
# `import agentharness.v1.session_service_pb2_grpc` work once gen/python is installed or
# on sys.path, and py.typed so type checkers read the generated .pyi stubs.
py=$OUT/gen/python/agentharness
printf '"""Generated agent-harness protobuf and gRPC modules (see buf.gen.yaml)."""\n' >"$py/__init__.py"
printf '"""Package agentharness.v1: events_pb2, session_service_pb2, session_service_pb2_grpc."""\n' >"$py/v1/__init__.py"
: >"$py/py.typed"

echo "generated into $OUT/gen: $(cd "$OUT" && find gen/go/agentharness gen/python/agentharness gen/ts/src/gen -type f | wc -l) files"
