#!/usr/bin/env bash
# Test preparation (run by `npm test`): make sure an etcd server binary and the etcdctl client exist. Nothing is
# started here: the suites start their own private etcd in a temporary folder on a free port and stop it when they
# end (test/helpers/private.ts); the change-feed tests write with etcdctl as "another program".
# When a binary is not installed, Debian's package (etcd-server, etcd-client) is downloaded and unpacked into a user
# cache folder (no root needed, and no system service gets installed or started). When that is not possible it says
# so, and the tests that need it skip loudly (and fail under CI=true).
set -u

CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/cfgu-test/etcd"

# fetch BINARY PACKAGE: unpack PACKAGE into the cache unless BINARY is already on PATH, in /usr/bin or in the cache.
fetch() {
  local bin="$1" pkg="$2"
  if command -v "$bin" >/dev/null 2>&1 || [ -x "/usr/bin/$bin" ] || [ -x "$CACHE/usr/bin/$bin" ]; then
    return 0
  fi
  if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-deb >/dev/null 2>&1; then
    echo "test-setup-etcd: $bin is missing and apt-get/dpkg-deb are not available; the tests needing it will be skipped" >&2
    return 0
  fi
  echo "test-setup-etcd: downloading $pkg (Debian package) into $CACHE" >&2
  local work
  work="$(mktemp -d)"
  if (cd "$work" && apt-get download -q "$pkg" >/dev/null 2>&1); then
    mkdir -p "$CACHE" && dpkg-deb -x "$work"/"$pkg"_*.deb "$CACHE"
  fi
  rm -rf "$work"
  [ -x "$CACHE/usr/bin/$bin" ] || echo "test-setup-etcd: could not fetch $pkg; the tests needing $bin will be skipped" >&2
}

fetch etcd etcd-server
fetch etcdctl etcd-client
exit 0
