#!/usr/bin/env bash
# Test preparation (run by `npm test`): make sure an etcd server binary and the etcdctl client exist. Nothing is
# started here: the suites start their own private etcd in a temporary folder on a free port and stop it when they
# end (test/helpers/private.ts); the change-feed tests write with etcdctl as "another program".
# When a binary is not installed, Debian's package (etcd-server, etcd-client) is unpacked into the user cache folder
# cfgu-test/etcd (scripts/debian-tool.sh: no root needed, and no system service gets installed or started). When that
# is not possible it says so, and the tests that need it skip loudly (and fail under CI=true).
set -u
. "$(dirname "$0")/debian-tool.sh"
ensure_debian_tool etcd etcd-server etcd
ensure_debian_tool etcdctl etcd-client etcd
exit 0
