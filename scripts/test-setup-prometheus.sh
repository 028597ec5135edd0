#!/usr/bin/env bash
# Test preparation (run by `npm test`): make sure a Prometheus server binary exists for the metrics test. Nothing is
# started here: test/server/metrics-prometheus.test.ts starts its own Prometheus (a generated scrape configuration, a
# temporary data folder, a free loopback port) and stops it when it ends. When prometheus is not installed, Debian's
# prometheus package is unpacked into a user cache folder (scripts/debian-tool.sh).
set -u
. "$(dirname "$0")/debian-tool.sh"
ensure_debian_tool prometheus prometheus
exit 0
