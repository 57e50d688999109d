#!/usr/bin/env bash
# Installs every tool the test suites need, from the package registries only, into the
# repo-local .tools/ (gitignored), and writes .tools/env.sh for the suites to source.
#
# Idempotent and fast when everything is present: each step records a stamp (the pins or the
# lock file's hash) and is skipped while the stamp matches and its output exists.
#
#   npm      tests/tools (claude CLI, codex CLI, gemini CLI, the codex-acp bridge, buf,
#            protoc-gen-es, playwright-core; the newest claude, codex, gemini and
#            codex-acp releases in tests/tools/newest) and every other
#            package-lock.json of the test suites (gen/ts, tests/ts, tests/browser) and the
#            web console (server/web)
#   Go       protoc-gen-go, protoc-gen-go-grpc, grpcurl, nats-server  -> .tools/bin (GOBIN),
#            and the load tool's JetStream driver tests/load/nats -> .tools/bin/nats-load
#   PyPI     .tools/venv from tests/python/requirements.txt
#   Debian   chromium, jq, util-linux (unshare), postgresql (the PostgreSQL store's
#            tests start their own server from it), haproxy and nginx (the cluster
#            test runs the balancers of deploy/ in front of three nodes) (only those
#            missing)
#   rustup   clippy and rustfmt components (only when missing)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TOOLS=$ROOT/.tools
STAMPS=$TOOLS/stamps
mkdir -p "$TOOLS/bin" "$STAMPS"

# Pinned versions of the Go-installed tools (the Go module proxy serves them).
PROTOC_GEN_GO=google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
PROTOC_GEN_GO_GRPC=google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
GRPCURL=github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.4
# The load tool's JetStream peer (tests/load/src/peers/nats.rs).
NATS_SERVER=github.com/nats-io/nats-server/v2@v2.15.2

say() { printf '  [setup] %s\n' "$*"; }
hash_of() { cat "$@" | sha256sum | cut -c1-16; }
stamp_ok() { [ -f "$STAMPS/$1" ] && [ "$(cat "$STAMPS/$1")" = "$2" ]; }
stamp_set() { printf '%s' "$2" >"$STAMPS/$1"; }
# Runs a download step up to three times: a registry that drops one connection should not
# fail the whole run. Each failure is reported; the third one stops the script.
retry() {
  local try
  for try in 1 2 3; do
    "$@" && return 0
    if [ "$try" -lt 3 ]; then
      say "failed (try $try of 3), trying again in $((try * 5)) s: $*"
      sleep $((try * 5))
    fi
  done
  echo "tests/setup.sh: failed three times: $*" >&2
  return 1
}

need() {
  command -v "$1" >/dev/null 2>&1 || {
    echo "tests/setup.sh: '$1' is required on PATH ($2)" >&2
    exit 1
  }
}
need node "the npm tools"
need npm "the npm tools"
need go "protoc-gen-go, protoc-gen-go-grpc, grpcurl, nats-server"
# The gemini CLI declares Node >= 20 (engines) and fails at start-up on older ones.
node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" -lt 20 ]; then
  echo "tests/setup.sh: node $(node --version) is too old: the gemini CLI needs Node >= 20" >&2
  exit 1
fi
need python3 "the Python test venv"
need cargo "the Rust workspace"

# --- Go tools and the Python venv --------------------------------------------------------
# Both install beside the npm packages (each is mostly downloads, then a compile), each into a
# log printed when it is done.
go_tools() {
  for spec in "$PROTOC_GEN_GO" "$PROTOC_GEN_GO_GRPC" "$GRPCURL" "$NATS_SERVER"; do
    path=${spec%@*}
    bin=${path##*/}
    # A major-version suffix is not the binary's name: .../nats-server/v2 installs nats-server.
    case "$bin" in v[0-9]*) bin=${path%/*} && bin=${bin##*/} ;; esac
    key="go-$bin"
    want="$spec $(go env GOVERSION)"
    if stamp_ok "$key" "$want" && [ -x "$TOOLS/bin/$bin" ]; then
      say "go: $bin up to date"
    else
      say "go install $spec"
      GOBIN=$TOOLS/bin GOFLAGS=-mod=mod retry go install "$spec"
      stamp_set "$key" "$want"
    fi
  done

  # The load tool's JetStream driver, built from its committed go.mod/go.sum (the module cache
  # fills from the Go module proxy on the first build).
  want="$(go env GOVERSION) $(hash_of tests/load/nats/go.mod tests/load/nats/go.sum tests/load/nats/*.go)"
  if stamp_ok go-nats-load "$want" && [ -x "$TOOLS/bin/nats-load" ]; then
    say "go: nats-load up to date"
  else
    say "go build tests/load/nats -> .tools/bin/nats-load"
    go build -C tests/load/nats -buildvcs=false -o "$TOOLS/bin/nats-load" .
    stamp_set go-nats-load "$want"
  fi
}
VENV=$TOOLS/venv
python_venv() {
  want="$(python3 --version 2>&1) $(hash_of tests/python/requirements.txt)"
  if stamp_ok venv "$want" && [ -x "$VENV/bin/python" ]; then
    say "python venv: up to date"
  else
    say "python venv at .tools/venv from tests/python/requirements.txt"
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    retry "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r tests/python/requirements.txt
    stamp_set venv "$want"
  fi
}
# Jobs still running when this script ends early (a failed step) are stopped with it.
bg_pids=()
trap '[ ${#bg_pids[@]} -eq 0 ] || kill "${bg_pids[@]}" 2>/dev/null || true' EXIT
go_log=$(mktemp)
go_tools >"$go_log" 2>&1 &
go_pid=$!
py_log=$(mktemp)
python_venv >"$py_log" 2>&1 &
py_pid=$!
bg_pids=("$go_pid" "$py_pid")
# Waits for a job started in the background (these two, and each npm ci below): prints its
# log, fails when it did.
join_job() {
  local rc=0
  wait "$2" || rc=$?
  cat "$3"
  rm -f "$3"
  [ "$rc" -eq 0 ] || { echo "tests/setup.sh: $1 failed (exit $rc)" >&2; exit 1; }
}

# --- npm ---------------------------------------------------------------------------------
# `npm ci` installs exactly the committed lock. npm 11 skips install scripts by default; the
# claude CLI and buf do not need theirs (their native binaries come as optional platform
# packages), which tests/setup.sh checks below by running both.
npm_dirs=(tests/tools tests/tools/newest)
for d in gen/ts tests/ts tests/browser server/web; do
  [ -f "$d/package-lock.json" ] && npm_dirs+=("$d")
done
# The directories install at once (mostly downloads; npm's cache takes concurrent writers), each
# into a log printed when it is done.
npm_jobs=()
for d in "${npm_dirs[@]}"; do
  key="npm-$(echo "$d" | tr / _)"
  want="$(node --version) $(hash_of "$d/package.json" "$d/package-lock.json")"
  if stamp_ok "$key" "$want" && [ -d "$d/node_modules" ]; then
    say "npm: $d up to date"
  else
    say "npm ci in $d"
    log=$(mktemp)
    (cd "$d" && retry npm ci --no-audit --no-fund --loglevel=error && say "npm ci in $d: done") >"$log" 2>&1 &
    npm_jobs+=("$!|$d|$key|$want|$log")
    bg_pids+=("$!")
  fi
done
for job in "${npm_jobs[@]}"; do
  IFS='|' read -r pid d key want log <<<"$job"
  join_job "npm ci in $d" "$pid" "$log"
  stamp_set "$key" "$want"
done
bg_pids=("$go_pid" "$py_pid")

# The real claude binary: the platform package's native executable (what bin/claude.exe is
# linked from when the install script runs); bin/claude.exe as a fallback.
case "$(uname -m)" in
  x86_64 | amd64) claude_pkg=claude-code-linux-x64 ;;
  aarch64 | arm64) claude_pkg=claude-code-linux-arm64 ;;
  *) claude_pkg=unknown ;;
esac
CLAUDE_BIN=$ROOT/tests/tools/node_modules/@anthropic-ai/$claude_pkg/claude
[ -x "$CLAUDE_BIN" ] || CLAUDE_BIN=$ROOT/tests/tools/node_modules/@anthropic-ai/claude-code/bin/claude.exe
claude_version=$("$CLAUDE_BIN" --version 2>/dev/null || true)
pinned_claude=$(node -p 'require("./tests/tools/package.json").dependencies["@anthropic-ai/claude-code"]')
case "$claude_version" in
  "$pinned_claude"*) say "claude CLI: $CLAUDE_BIN ($claude_version)" ;;
  *)
    echo "tests/setup.sh: $CLAUDE_BIN --version said '$claude_version', want $pinned_claude" >&2
    exit 1
    ;;
esac
# The newest CLI release checked (tests/tools/newest): run-all.sh runs the real-CLI suite
# against it too, so what works on the pinned CLI keeps working on the newest.
CLAUDE_BIN_NEWEST=$ROOT/tests/tools/newest/node_modules/@anthropic-ai/$claude_pkg/claude
[ -x "$CLAUDE_BIN_NEWEST" ] || CLAUDE_BIN_NEWEST=$ROOT/tests/tools/newest/node_modules/@anthropic-ai/claude-code/bin/claude.exe
newest_version=$("$CLAUDE_BIN_NEWEST" --version 2>/dev/null || true)
newest_claude=$(node -p 'require("./tests/tools/newest/package.json").dependencies["@anthropic-ai/claude-code"]')
case "$newest_version" in
  "$newest_claude"*) say "newest claude CLI: $CLAUDE_BIN_NEWEST ($newest_version)" ;;
  *)
    echo "tests/setup.sh: $CLAUDE_BIN_NEWEST --version said '$newest_version', want $newest_claude" >&2
    exit 1
    ;;
esac
# The real codex binary: the platform package's native executable (what bin/codex.js execs),
# the npm bin as a fallback; pinned in tests/tools, the newest release in tests/tools/newest.
case "$(uname -m)" in
  x86_64 | amd64) codex_native=codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex ;;
  aarch64 | arm64) codex_native=codex-linux-arm64/vendor/aarch64-unknown-linux-musl/bin/codex ;;
  *) codex_native=unknown ;;
esac
codex_bin_in() {
  local bin=$ROOT/$1/node_modules/@openai/$codex_native
  [ -x "$bin" ] || bin=$ROOT/$1/node_modules/.bin/codex
  local want version
  want=$(node -p "require('./$1/package.json').dependencies['@openai/codex']")
  version=$("$bin" --version 2>/dev/null || true)
  if [ "$version" != "codex-cli $want" ]; then
    echo "tests/setup.sh: $bin --version said '$version', want codex-cli $want" >&2
    exit 1
  fi
  printf '%s' "$bin"
}
CODEX_BIN=$(codex_bin_in tests/tools)
say "codex CLI: $CODEX_BIN ($("$CODEX_BIN" --version))"
CODEX_BIN_NEWEST=$(codex_bin_in tests/tools/newest)
say "newest codex CLI: $CODEX_BIN_NEWEST ($("$CODEX_BIN_NEWEST" --version))"
# The real gemini CLI: a node script (bundle/gemini.js) behind the npm bin; pinned in
# tests/tools, the newest release in tests/tools/newest.
gemini_bin_in() {
  local bin=$ROOT/$1/node_modules/.bin/gemini
  local want version
  want=$(node -p "require('./$1/package.json').dependencies['@google/gemini-cli']")
  version=$("$bin" --version 2>/dev/null || true)
  if [ "$version" != "$want" ]; then
    echo "tests/setup.sh: $bin --version said '$version', want $want" >&2
    exit 1
  fi
  printf '%s' "$bin"
}
GEMINI_BIN=$(gemini_bin_in tests/tools)
say "gemini CLI: $GEMINI_BIN ($("$GEMINI_BIN" --version))"
GEMINI_BIN_NEWEST=$(gemini_bin_in tests/tools/newest)
say "newest gemini CLI: $GEMINI_BIN_NEWEST ($("$GEMINI_BIN_NEWEST" --version))"
# The codex-acp bridge (an ACP agent over `codex app-server`, with its own pinned codex
# beside it): a node script behind the npm bin; pinned in tests/tools, the newest release in
# tests/tools/newest.
codex_acp_bin_in() {
  local bin=$ROOT/$1/node_modules/.bin/codex-acp
  local want version
  want=$(node -p "require('./$1/package.json').dependencies['@agentclientprotocol/codex-acp']")
  version=$("$bin" --version </dev/null 2>/dev/null || true)
  if [ "$version" != "@agentclientprotocol/codex-acp $want" ]; then
    echo "tests/setup.sh: $bin --version said '$version', want @agentclientprotocol/codex-acp $want" >&2
    exit 1
  fi
  printf '%s' "$bin"
}
CODEX_ACP_BIN=$(codex_acp_bin_in tests/tools)
say "codex-acp: $CODEX_ACP_BIN ($("$CODEX_ACP_BIN" --version </dev/null))"
CODEX_ACP_BIN_NEWEST=$(codex_acp_bin_in tests/tools/newest)
say "newest codex-acp: $CODEX_ACP_BIN_NEWEST ($("$CODEX_ACP_BIN_NEWEST" --version </dev/null))"
buf_version=$(tests/tools/node_modules/.bin/buf --version)
say "buf: $buf_version"

join_job "the Go tools" "$go_pid" "$go_log"
join_job "the Python venv" "$py_pid" "$py_log"
bg_pids=()
"$VENV/bin/python" -c 'import grpc, grpc_tools, google.protobuf, pytest' || {
  echo "tests/setup.sh: the venv lacks grpcio/grpcio-tools/protobuf/pytest" >&2
  exit 1
}


# --- Debian packages: chromium (browser suite), jq (grpcurl suite), unshare (full-disk test),
# postgresql (server/tests/support/postgres.rs runs initdb/pg_ctl from /usr/lib/postgresql/*/bin;
# the package's own cluster is not used), haproxy and nginx (tests/cluster starts its own from
# deploy/; the packages' services are not used) ---
missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v jq >/dev/null 2>&1 || missing+=(jq)
# make and a C compiler: the server binary's allocator (jemalloc) is built from source by cargo.
command -v make >/dev/null 2>&1 || missing+=(make)
command -v cc >/dev/null 2>&1 || missing+=(gcc)
command -v unshare >/dev/null 2>&1 || missing+=(util-linux)
compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null || missing+=(postgresql)
command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || missing+=(haproxy)
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx)
if [ ${#missing[@]} -gt 0 ]; then
  sudo=()
  [ "$(id -u)" = 0 ] || sudo=(sudo)
  say "apt-get install ${missing[*]}"
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi
say "chromium: $(/usr/bin/chromium --version 2>/dev/null || echo present); $(jq --version)"
say "postgresql: $(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
say "$(PATH=$PATH:/usr/sbin haproxy -v | head -1); $(PATH=$PATH:/usr/sbin nginx -v 2>&1)"

# --- Rust components ---------------------------------------------------------------------
if command -v rustup >/dev/null 2>&1; then
  installed=$(rustup component list --installed)
  for c in clippy rustfmt; do
    if grep -q "^$c" <<<"$installed"; then
      say "rust: $c present"
    else
      say "rustup component add $c"
      rustup component add "$c"
    fi
  done
fi

# --- env.sh ------------------------------------------------------------------------------
cat >"$TOOLS/env.sh" <<EOF
# Written by tests/setup.sh: puts the test tools first on PATH. Source it from bash.
export AGENT_HARNESS_ROOT="$ROOT"
export GOBIN="$TOOLS/bin"
export VIRTUAL_ENV="$VENV"
export PATH="$TOOLS/bin:$ROOT/tests/tools/node_modules/.bin:$VENV/bin:\$PATH"
export CLAUDE_BIN="$CLAUDE_BIN"
export CLAUDE_BIN_NEWEST="$CLAUDE_BIN_NEWEST"
export CODEX_BIN="$CODEX_BIN"
export CODEX_BIN_NEWEST="$CODEX_BIN_NEWEST"
export GEMINI_BIN="$GEMINI_BIN"
export GEMINI_BIN_NEWEST="$GEMINI_BIN_NEWEST"
export CODEX_ACP_BIN="$CODEX_ACP_BIN"
export CODEX_ACP_BIN_NEWEST="$CODEX_ACP_BIN_NEWEST"
export CHROMIUM_BIN="/usr/bin/chromium"
export AGENT_HARNESS_BIN="\${AGENT_HARNESS_BIN:-$ROOT/target/release/agent-harness}"
export NATS_SERVER_BIN="\${NATS_SERVER_BIN:-$TOOLS/bin/nats-server}"
export NATS_LOAD_BIN="\${NATS_LOAD_BIN:-$TOOLS/bin/nats-load}"
export FAKE_MESSAGES_API_BIN="\${FAKE_MESSAGES_API_BIN:-$ROOT/target/release/fake-messages-api}"
EOF
say "wrote .tools/env.sh"
