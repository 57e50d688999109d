#!/usr/bin/env bash
# Installable clients: builds each package the way it is shipped, installs it the way a user
# would, and drives a real server with it (the server binary, the real claude CLI, the fake
# Messages API). Four parts, each timed:
#
#   1. Rust: `cargo package` of agent-harness-protocol, -client and -server together (each
#      verified by building it against the others' packaged versions), the file lists checked;
#      the packaged server build's --version; `cargo install --path server`, then the installed
#      binary's --version, `doctor`, and a session served by it and driven by its terminal client.
#   2. TypeScript: `npm pack` of gen/ts (its prepack builds dist/), installed into a fresh npm
#      project with @connectrpc/connect-node, typescript and @types/node from the registry; a
#      program importing @agent-harness/client/client and /protocol is type-checked (strict,
#      nodenext), compiled and run: Start, the handle's derived status idle after turn_end, the
#      answer text.
#   3. Python: a wheel of gen/python built with `python -m build`, installed into a fresh venv,
#      a program Starts and Subscribes until turn_end and checks the text.
#   4. Go: gen/go published as v0.1.0 into a file-based module proxy (GOPROXY=file://...), a
#      separate module `go get`s it from there, builds and runs a program that Starts and
#      Subscribes until turn_end and checks the text.
#
# Every package must carry the repository's LICENSE, byte for byte. Prints `ok: ...` per check
# and the wall time per part; any failure prints what failed and exits non-zero.
#
# The clients talk to the installed server binary, or with AGENT_HARNESS_PREBUILT=1 to
# AGENT_HARNESS_BIN (default target/debug/agent-harness) with FAKE_MESSAGES_API_BIN (default
# target/debug/fake-messages-api): the debug binaries `cargo test` built. Part 1 runs in either
# case.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
# Whether the caller named the binaries (.tools/env.sh sets defaults for both).
caller_server_bin=${AGENT_HARNESS_BIN:-}
caller_fake_bin=${FAKE_MESSAGES_API_BIN:-}
[ -f .tools/env.sh ] || ./tests/setup.sh
# shellcheck disable=SC1091
source .tools/env.sh

# The shared target dir: the package verification and the install reuse what `cargo test` and
# `cargo build` compiled there. (They also relink target/debug/agent-harness from the crate
# they built: the same sources, so the same server.)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/agent-harness-packages.XXXXXX")
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  # The Go module cache is read-only unless -modcacherw; make sure everything can go.
  chmod -R u+w "$tmp" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'echo "FAIL: line $LINENO: $BASH_COMMAND (exit $?)" >&2' ERR

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
ok() { echo "ok: $*"; }

script_start=$SECONDS
part_name=""
part_start=0
part() {
  part_end
  part_name=$1
  part_start=$SECONDS
  echo "--- $part_name"
}
timings=()
part_end() {
  if [ -n "$part_name" ]; then
    timings+=("$(printf '%-12s %4d s' "$part_name" $((SECONDS - part_start)))")
    echo "    ($part_name: $((SECONDS - part_start)) s)"
  fi
  part_name=""
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Every package's version: the workspace's.
version=$(sed -n '/^\[workspace.package\]/,/^\[/ s/^version = "\(.*\)"$/\1/p' Cargo.toml)
[ -n "$version" ] || fail "no [workspace.package] version in Cargo.toml"
ts_version=$(node -p 'require("./gen/ts/package.json").version')
py_version=$(sed -n 's/^version = "\(.*\)"$/\1/p' gen/python/pyproject.toml)
[ "$ts_version" = "$version" ] || fail "gen/ts/package.json version $ts_version, the workspace's is $version"
[ "$py_version" = "$version" ] || fail "gen/python/pyproject.toml version $py_version, the workspace's is $version"
ok "every package is version $version"

# A unique answer per run: the fake model replies with the words after TEXT.
run_id="$(date +%s)-$$"
prompt_for() { echo "TEXT packaged $1 client $run_id"; }
answer_for() { echo "packaged $1 client $run_id"; }

# --- the fake Messages API and servers ---------------------------------------------------------
fake_url=""
start_fake() {
  "$fake_bin" --port 0 >"$tmp/fake.out" 2>"$tmp/fake.log" &
  pids+=($!)
  local pid=$! deadline=$((SECONDS + 30))
  until grep -q '^listening ' "$tmp/fake.out"; do
    kill -0 "$pid" 2>/dev/null || fail "fake-messages-api exited: $(tail -20 "$tmp/fake.log")"
    [ "$SECONDS" -lt "$deadline" ] || fail "fake-messages-api printed no address in 30 s: $(tail -20 "$tmp/fake.log")"
    sleep 0.1
  done
  fake_url=$(sed -n 's/^listening //p' "$tmp/fake.out" | head -1)
}

# The environment of a server: nothing of this shell's but PATH, a fresh HOME, and the fake
# Messages API for the CLI.
senv=()
server_env() {
  senv=(PATH="$PATH" HOME="$1/home" ANTHROPIC_BASE_URL="$fake_url" ANTHROPIC_API_KEY=test
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1)
}

# start_server NAME BIN: serves on a free port with its own home, CLI working directory and data
# dir under $tmp/NAME; sets server_url and server_addr once the terminal client of BIN lists its
# sessions.
server_url=""
server_addr=""
start_server() {
  local name=$1 bin=$2 dir=$tmp/$1
  mkdir -p "$dir/home" "$dir/work"
  local port
  port=$(free_port)
  server_env "$dir"
  env -i -C "$dir/work" "${senv[@]}" "$bin" serve --listen "127.0.0.1:$port" \
    --data-dir "$dir/data" --adapter interactive --claude-bin "$CLAUDE_BIN" >"$dir/server.log" 2>&1 &
  pids+=($!)
  local pid=$!
  server_addr=127.0.0.1:$port
  server_url=http://$server_addr
  local deadline=$((SECONDS + 30))
  until "$bin" ls --server "$server_url" >/dev/null 2>&1; do
    kill -0 "$pid" 2>/dev/null || fail "$name: $bin exited before serving: $(tail -20 "$dir/server.log")"
    [ "$SECONDS" -lt "$deadline" ] || fail "$name: not serving after 30 s: $(tail -20 "$dir/server.log")"
    sleep 0.1
  done
  ok "$name: $bin serves on $server_addr"
}

# same_license FILE WHAT: FILE is the repository's LICENSE, byte for byte.
same_license() {
  cmp -s "$1" LICENSE || fail "$2 carries no LICENSE, or one that differs from the repository's"
  ok "$2 carries LICENSE"
}

# The server the TypeScript, Python and Go clients drive: with AGENT_HARNESS_PREBUILT the
# prebuilt binary (CI: what `cargo test` built), started now, before part 1's builds relink
# target/debug/agent-harness; else the one the caller named, or the binary part 1 installs.
clients_url=""
clients_addr=""
if [ -n "${AGENT_HARNESS_PREBUILT:-}" ]; then
  fake_bin=${caller_fake_bin:-$CARGO_TARGET_DIR/debug/fake-messages-api}
  [ -x "$fake_bin" ] || fail "no fake Messages API at $fake_bin"
  start_fake
  start_server prebuilt "${caller_server_bin:-$CARGO_TARGET_DIR/debug/agent-harness}"
  clients_url=$server_url
  clients_addr=$server_addr
fi

# --- 1. Rust -----------------------------------------------------------------------------------
part rust
crates=(agent-harness-protocol agent-harness-client agent-harness-server)
started=$SECONDS
# Packaged together: cargo puts each crate in a local registry overlay, so the client builds
# against the packaged protocol crate and the server against both (nothing is published).
# --allow-dirty: the check is of what the tree holds now, committed or not.
# The verify builds take their profile from the packaged manifests, which carry no [profile]
# (only a workspace root has one): cargo's default dev profile, full debug info, would compile
# every dependency again beside the workspace's line-tables-only build (over 300 crates on a
# clean machine). The workspace's settings (Cargo.toml) given here make the dependencies the
# same units the workspace's builds compiled, where their features agree.
# shellcheck disable=SC2046
CARGO_PROFILE_DEV_DEBUG=line-tables-only CARGO_PROFILE_DEV_BUILD_OVERRIDE_DEBUG=line-tables-only \
  cargo package --locked --allow-dirty $(printf -- '-p %s ' "${crates[@]}") >"$tmp/cargo-package.log" 2>&1 ||
  fail "cargo package: $(tail -40 "$tmp/cargo-package.log")"
ok "cargo package ${crates[*]}: packaged and verified ($((SECONDS - started)) s)"

for crate in "${crates[@]}"; do
  file=$CARGO_TARGET_DIR/package/$crate-$version.crate
  [ -f "$file" ] || fail "no $file"
  mkdir -p "$tmp/crates"
  tar -xzf "$file" -C "$tmp/crates"
  dir=$tmp/crates/$crate-$version
  list=$(cd "$dir" && find . -type f | sed 's|^\./||' | sort)
  same_license "$dir/LICENSE" "crate $crate"
  # What a crate must not carry: the tests and benchmarks (they need the repository), build
  # output, node_modules, editor or OS leftovers.
  junk=$(grep -E '^(tests|benches|target)/|node_modules/|(^|/)\.DS_Store$|~$|\.(orig|rej|swp)$' <<<"$list" |
    grep -v '^Cargo.toml.orig$' || true)
  [ -z "$junk" ] || fail "crate $crate carries files it should not: $junk"
  ok "crate $crate: $(wc -l <<<"$list") files, no tests, benches or build output"
done
# The protocol crate builds from its own copy of proto/.
for proto in proto/agentharness/v1/*.proto; do
  cmp -s "$proto" "$tmp/crates/agent-harness-protocol-$version/$proto" ||
    fail "crate agent-harness-protocol: $proto missing or different"
done
ok "crate agent-harness-protocol carries proto/ as in the repository"
# The server embeds the console it carries.
for f in index.html console.js console.css favicon.svg; do
  cmp -s "server/web/dist/$f" "$tmp/crates/agent-harness-server-$version/web/dist/$f" ||
    fail "crate agent-harness-server: web/dist/$f missing or different"
done
ok "crate agent-harness-server carries web/dist"

# The packaged server's verify build (from target/package/, no git around it): its --version
# names the commit `cargo package` recorded in .cargo_vcs_info.json (else "unknown").
vcs_sha=$(sed -n 's/.*"sha1": *"\([0-9a-f]\{10\}\).*/\1/p' "$tmp/crates/agent-harness-server-$version/.cargo_vcs_info.json")
# The verify build shares the target dir, so it relinked target/debug/agent-harness; the
# dep-info cargo wrote beside it names the sources it was built from: the packaged ones.
verify_bin=$CARGO_TARGET_DIR/debug/agent-harness
grep -q "/package/agent-harness-server-$version/src/main.rs" "$verify_bin.d" ||
  fail "$verify_bin is not the packaged build ($verify_bin.d names other sources: did another build relink it?)"
packaged_version=$("$verify_bin" --version)
case "$packaged_version" in
  "agent-harness $version (commit ${vcs_sha:-unknown}"*) ok "packaged build: $packaged_version" ;;
  *) fail "packaged build: --version said '$packaged_version', want agent-harness $version (commit ${vcs_sha:-unknown}...)" ;;
esac

# A debug install: with the shared target dir it reuses the dev build of the dependencies. A
# release install would compile everything again in the release profile (about 10 minutes cold
# on a 2-core machine), which CI cannot afford here; the release build itself is what
# tests/run-all.sh builds anyway.
started=$SECONDS
cargo install --path server --locked --debug --root "$tmp/cargo-root" >"$tmp/cargo-install.log" 2>&1 ||
  fail "cargo install: $(tail -40 "$tmp/cargo-install.log")"
installed=$tmp/cargo-root/bin/agent-harness
[ -x "$installed" ] || fail "cargo install left no $installed"
ok "cargo install --path server --locked --debug ($((SECONDS - started)) s)"
head_sha=$(git rev-parse --short=10 HEAD)
installed_version=$("$installed" --version)
case "$installed_version" in
  "agent-harness $version (commit $head_sha"*) ok "installed: $installed_version" ;;
  *) fail "installed: --version said '$installed_version', want agent-harness $version (commit $head_sha...)" ;;
esac

if [ -z "$fake_url" ]; then
  fake_bin=${caller_fake_bin:-}
  if [ -z "$fake_bin" ]; then
    started=$SECONDS
    cargo build --quiet -p agent-harness-fake-api
    fake_bin=$CARGO_TARGET_DIR/debug/fake-messages-api
    ok "cargo build -p agent-harness-fake-api ($((SECONDS - started)) s)"
  fi
  start_fake
fi

mkdir -p "$tmp/doctor/home"
port=$(free_port)
server_env "$tmp/doctor"
if ! doctor_out=$(env -i -C "$tmp/doctor" "${senv[@]}" "$installed" doctor \
  --listen "127.0.0.1:$port" --data-dir "$tmp/doctor/data" --adapter interactive --claude-bin "$CLAUDE_BIN" 2>&1); then
  fail "installed: doctor found failures:
$doctor_out"
fi
ok "installed: doctor passes ($(grep -c '^ok' <<<"$doctor_out") checks ok, $(grep -c '^warn' <<<"$doctor_out" || true) warnings)"

start_server installed "$installed"
installed_url=$server_url
installed_addr=$server_addr
session="pkg-rust-$run_id"
"$installed" start "$session" "$(prompt_for rust)" --server "$installed_url" >/dev/null
tail_out=$(timeout 90 "$installed" tail "$session" --until-idle --server "$installed_url") ||
  fail "installed: tail --until-idle failed: $tail_out"
grep -qF "$(answer_for rust)" <<<"$tail_out" || fail "installed: tail printed no '$(answer_for rust)': $tail_out"
ok "installed: served a session, its terminal client got the answer"

# The other clients drive the installed binary, unless a prebuilt one runs already or the
# caller named one.
if [ -z "$clients_addr" ] && [ -n "$caller_server_bin" ]; then
  start_server given "$caller_server_bin"
  clients_url=$server_url
  clients_addr=$server_addr
elif [ -z "$clients_addr" ]; then
  clients_url=$installed_url
  clients_addr=$installed_addr
fi

# --- 2. TypeScript -----------------------------------------------------------------------------
part typescript
# Packed from a copy of gen/ts (without its node_modules and dist/), as the wheel is built from a
# copy of gen/python: the client suites may run beside this script (tests/run-all.sh) and read
# gen/ts/node_modules and dist/, which an `npm ci` here would remove. npm ci: the build's own
# tools (esbuild, tsc) for the prepack script.
mkdir -p "$tmp/ts-src"
tar -C gen/ts --exclude=./node_modules --exclude=./dist -cf - . | tar -C "$tmp/ts-src" -xf -
(cd "$tmp/ts-src" && npm ci --no-audit --no-fund --loglevel=error)
mkdir -p "$tmp/npm"
tarball=$(cd "$tmp/ts-src" && npm pack --silent --pack-destination "$tmp/npm")
tarball=$tmp/npm/$tarball
[ -f "$tarball" ] || fail "npm pack wrote no $tarball"
ok "npm pack: $(basename "$tarball") ($(tar -tzf "$tarball" | wc -l) files)"
mkdir -p "$tmp/npm/unpacked"
tar -xzf "$tarball" -C "$tmp/npm/unpacked"
same_license "$tmp/npm/unpacked/package/LICENSE" "npm package"
for f in protocol client react; do
  [ -f "$tmp/npm/unpacked/package/dist/$f.js" ] && [ -f "$tmp/npm/unpacked/package/dist/$f.d.ts" ] ||
    fail "npm package: no dist/$f.js or dist/$f.d.ts"
done
ok "npm package carries dist/ (built by prepack)"

app=$tmp/ts-app
mkdir -p "$app"
(
  cd "$app"
  npm init -y >/dev/null
  npm pkg set type=module
  npm install --no-audit --no-fund --loglevel=error "$tarball" @connectrpc/connect-node typescript @types/node
)
ok "npm install of the tarball with @connectrpc/connect-node, typescript, @types/node"
cp tests/packages/ts-consumer/main.ts tests/packages/ts-consumer/tsconfig.json "$app/"
(cd "$app" && npx tsc -p tsconfig.json) || fail "the TypeScript program does not type-check against the package"
ok "tsc (strict, nodenext): the program type-checks against the package"
ts_out=$(cd "$app" && timeout 120 node dist/main.js "$clients_url" "pkg-ts-$run_id" "$(prompt_for ts)" "$(answer_for ts)" 2>&1) ||
  fail "TypeScript program: $ts_out"
grep -qx "status: idle" <<<"$ts_out" && grep -qxF "answer: $(answer_for ts)" <<<"$ts_out" ||
  fail "TypeScript program printed: $ts_out"
ok "TypeScript: session handle started a session, status idle after turn_end, answer right"

# --- 3. Python ---------------------------------------------------------------------------------
part python
python3 -m venv "$tmp/py-build"
"$tmp/py-build/bin/python" -m pip install --quiet --disable-pip-version-check build
# Built from a copy: setuptools writes build/ and *.egg-info next to the sources.
cp -r gen/python "$tmp/py-src"
"$tmp/py-build/bin/python" -m build --wheel --outdir "$tmp/py-dist" "$tmp/py-src" >"$tmp/py-build.log" 2>&1 ||
  fail "python -m build: $(tail -20 "$tmp/py-build.log")"
wheel=$(ls "$tmp"/py-dist/*.whl)
ok "python -m build --wheel: $(basename "$wheel")"
mkdir -p "$tmp/py-wheel"
python3 -m zipfile -e "$wheel" "$tmp/py-wheel"
same_license "$(ls "$tmp"/py-wheel/*.dist-info/licenses/LICENSE)" "wheel"
python3 -m venv "$tmp/py-run"
"$tmp/py-run/bin/python" -m pip install --quiet --disable-pip-version-check "$wheel"
ok "pip install of the wheel into a fresh venv"
# -I: only the venv, nothing from PYTHONPATH, the user's site or the repository.
py_out=$(cd "$tmp" && timeout 120 "$tmp/py-run/bin/python" -I "$ROOT/tests/packages/py_consumer.py" \
  "$clients_addr" "pkg-py-$run_id" "$(prompt_for python)" "$(answer_for python)" 2>&1) ||
  fail "Python program: $py_out"
grep -qF "from $tmp/py-run/" <<<"$py_out" || fail "Python program did not import the installed wheel: $py_out"
ok "Python: Start and Subscribe until turn_end, answer right (agentharness from the venv)"

# --- 4. Go -------------------------------------------------------------------------------------
part go
# gen/go as version v$version in a file-based module proxy, zipped by golang.org/x/mod/zip. No
# VCS host is reachable from the test machine; a proxy, unlike a `replace`, makes `go get`
# resolve, download and checksum the module as it would from a real one.
go -C tests/packages/goproxy run . -dir "$ROOT/gen/go" -version "v$version" -out "$tmp/goproxy"
unzip -p "$tmp/goproxy/github.com/agent-harness/agent-harness/gen/go/@v/v$version.zip" \
  "github.com/agent-harness/agent-harness/gen/go@v$version/LICENSE" >"$tmp/go-license"
same_license "$tmp/go-license" "Go module zip"
mkdir -p "$tmp/go-app"
cp tests/packages/go-consumer/main.go "$tmp/go-app/"
(
  cd "$tmp/go-app"
  # A module cache of its own, so the module comes from the proxy and not from an earlier run;
  # the other modules (grpc, protobuf) from the machine's module cache, else the public proxy.
  # The checksum database cannot know an unpublished module: GONOSUMDB for it alone.
  export GOMODCACHE=$tmp/gomodcache GOFLAGS="-modcacherw -buildvcs=false" \
    GOPROXY="file://$tmp/goproxy,file://$(go env GOMODCACHE)/cache/download,https://proxy.golang.org" \
    GONOSUMDB=github.com/agent-harness/agent-harness
  go mod init example.com/consumer
  go get "github.com/agent-harness/agent-harness/gen/go@v$version"
  go mod tidy
  go vet .
  go build -o consumer .
) >"$tmp/go.log" 2>&1 || fail "Go: go get, tidy, vet or build failed: $(tail -30 "$tmp/go.log")"
grep -q "github.com/agent-harness/agent-harness/gen/go v$version" "$tmp/go-app/go.mod" ||
  fail "Go: go.mod does not require gen/go v$version: $(cat "$tmp/go-app/go.mod")"
ok "Go: go get gen/go@v$version from the proxy, go vet, go build"
go_out=$(timeout 120 "$tmp/go-app/consumer" -addr "$clients_addr" -session "pkg-go-$run_id" -prompt "$(prompt_for go)" \
  -want "$(answer_for go)" 2>&1) || fail "Go program: $go_out"
ok "Go: Start and Subscribe until turn_end, answer right"
part_end

echo "--- timings"
printf '    %s\n' "${timings[@]}"
echo "packages: all checks passed ($((SECONDS - script_start)) s)"
