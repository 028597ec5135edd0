#!/usr/bin/env bash
# Test preparation (run by `npm test`): make sure an etcd binary exists. Nothing is started here: the suites start
# their own private etcd in a temporary folder on a free port and stop it when they end (test/helpers/private.ts).
# When etcd is not installed, Debian's etcd-server package is downloaded and unpacked into a user cache folder
# (no root needed, and no system service gets installed or started). When that is not possible it says so, and the
# etcd tests skip loudly (and fail under CI=true).
set -u

if command -v etcd >/dev/null 2>&1 || [ -x /usr/bin/etcd ]; then
  exit 0
fi
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/cfgu-test/etcd"
if [ -x "$CACHE/usr/bin/etcd" ]; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-deb >/dev/null 2>&1; then
  echo "test-setup-etcd: etcd is missing and apt-get/dpkg-deb are not available; the etcd tests will be skipped" >&2
  exit 0
fi
echo "test-setup-etcd: downloading etcd-server (Debian package) into $CACHE" >&2
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
if (cd "$WORK" && apt-get download -q etcd-server >/dev/null 2>&1); then
  mkdir -p "$CACHE" && dpkg-deb -x "$WORK"/etcd-server_*.deb "$CACHE"
fi
[ -x "$CACHE/usr/bin/etcd" ] || echo "test-setup-etcd: could not fetch etcd-server; the etcd tests will be skipped" >&2
exit 0
