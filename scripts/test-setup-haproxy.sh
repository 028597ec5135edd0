#!/usr/bin/env bash
# Test preparation (run by `npm test`): make sure Debian's `haproxy` binary exists for the replica test
# (test/deploy/replicas.test.ts, bench/replicas.ts). Installs the package only when the command is missing and starts
# nothing: Debian's package would start a system service, so a policy-rc.d refuses service starts during the install
# (and is removed again). When installing is not possible it says so, and the replica test skips loudly (and fails
# under CI=true).
set -u
command -v haproxy >/dev/null 2>&1 && exit 0
[ -x /usr/sbin/haproxy ] && exit 0
. "$(dirname "$0")/apt-install-missing.sh"
POLICY=/usr/sbin/policy-rc.d
ADDED=""
if [ ! -e "$POLICY" ] && [ -w /usr/sbin ]; then
  printf '#!/bin/sh\nexit 101\n' >"$POLICY" && chmod +x "$POLICY" && ADDED=1
fi
apt_install_missing test-setup-haproxy haproxy
[ -n "$ADDED" ] && rm -f "$POLICY"
exit 0
