#!/usr/bin/env bash
# Test preparation (run by `npm test`): make sure Debian's `haproxy` binary exists for the replica test
# (test/deploy/replicas.test.ts) and bench/replicas.mjs. Installs the package only when the command is missing and
# starts nothing: Debian's package would enable a system service, so policy-rc.d refuses service starts during the
# install. When installing is not possible it says so, and the replica test skips loudly (and fails under CI=true).
set -u

command -v haproxy >/dev/null 2>&1 && exit 0
[ -x /usr/sbin/haproxy ] && exit 0
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
    echo "test-setup-haproxy: haproxy missing and not root (no passwordless sudo); the replica test will be skipped" >&2
    exit 0
  fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "test-setup-haproxy: haproxy missing and apt-get is not available; the replica test will be skipped" >&2
  exit 0
fi
echo "test-setup-haproxy: installing haproxy (Debian package; its service is not started)" >&2
POLICY=/usr/sbin/policy-rc.d
ADDED=""
if [ ! -e "$POLICY" ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$POLICY" >/dev/null && $SUDO chmod +x "$POLICY" && ADDED=1
fi
try_install() { $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends haproxy >/dev/null 2>&1; }
try_install || { $SUDO apt-get update -q >/dev/null 2>&1; try_install; } ||
  echo "test-setup-haproxy: could not install haproxy; the replica test will be skipped" >&2
[ -n "$ADDED" ] && $SUDO rm -f "$POLICY"
exit 0
