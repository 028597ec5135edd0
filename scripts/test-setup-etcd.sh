#!/usr/bin/env bash
# Test preparation (run by `npm test`): make sure an etcd binary exists. Nothing is started here: the suites start
# their own private etcd in a temporary folder on a free port and stop it when they end (test/helpers/private.ts).
# When etcd is not installed, Debian's etcd-server package is unpacked into a user cache folder
# (scripts/debian-tool.sh: no root needed, and no system service gets installed or started).
set -u
. "$(dirname "$0")/debian-tool.sh"
ensure_debian_tool etcd etcd-server
exit 0
