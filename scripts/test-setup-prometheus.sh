#!/usr/bin/env bash
# Test preparation (run by `npm test`): make sure a Prometheus server binary exists for the metrics test. Nothing is
# started here: test/server/metrics-prometheus.test.ts starts its own Prometheus (a generated scrape configuration, a
# temporary data folder, a free loopback port) and stops it when it ends.
# When prometheus is not installed, Debian's prometheus package is downloaded and unpacked into a user cache folder
# (no root needed, no system service installed or started). When that is not possible it says so, and the test
# skips loudly (and fails under CI=true).
set -u

if command -v prometheus >/dev/null 2>&1 || [ -x /usr/bin/prometheus ]; then
  exit 0
fi
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/cfgu-test/prometheus"
if [ -x "$CACHE/usr/bin/prometheus" ]; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-deb >/dev/null 2>&1; then
  echo "test-setup-prometheus: prometheus is missing and apt-get/dpkg-deb are not available; the Prometheus test will be skipped" >&2
  exit 0
fi
echo "test-setup-prometheus: downloading prometheus (Debian package) into $CACHE" >&2
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
if (cd "$WORK" && apt-get download -q prometheus >/dev/null 2>&1); then
  mkdir -p "$CACHE" && dpkg-deb -x "$WORK"/prometheus_*.deb "$CACHE"
fi
[ -x "$CACHE/usr/bin/prometheus" ] || echo "test-setup-prometheus: could not fetch prometheus; the Prometheus test will be skipped" >&2
exit 0
