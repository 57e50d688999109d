#!/usr/bin/env bash
# Checks deploy/alerts.yml with promtool: `check rules` (syntax, PromQL, templates), then the
# unit tests of tests/deploy/alerts_test.yml (each alert fires on the series that should raise
# it, after its `for`, and not on a healthy node). That every agent_harness_* series the rules
# name is one a real server serves is checked by server/tests/rpc/metrics.rs.
#
# promtool comes from Debian's prometheus package, unpacked into .tools/promtool (the package
# is downloaded, not installed: installing it would start a Prometheus daemon).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
fail() { echo "FAIL: $*" >&2; exit 1; }

promtool=$ROOT/.tools/promtool/usr/bin/promtool
if [ ! -x "$promtool" ]; then
  echo "fetching promtool from Debian (package prometheus)"
  dl=$(mktemp -d)
  trap 'rm -rf "$dl"' EXIT
  # `apt-get download` needs the package lists: update once when it cannot find the package.
  (cd "$dl" && apt-get download -qq prometheus 2>/dev/null) || {
    apt-get update -qq
    (cd "$dl" && apt-get download -qq prometheus)
  }
  rm -rf "$ROOT/.tools/promtool"
  dpkg-deb -x "$dl"/prometheus_*.deb "$ROOT/.tools/promtool"
  [ -x "$promtool" ] || fail "no promtool in Debian's prometheus package"
fi
"$promtool" --version 2>&1 | head -n1

echo "\$ promtool check rules deploy/alerts.yml"
"$promtool" check rules deploy/alerts.yml || fail "promtool check rules"
echo "\$ promtool test rules tests/deploy/alerts_test.yml"
"$promtool" test rules tests/deploy/alerts_test.yml || fail "promtool test rules"
echo "ok: alerts"
