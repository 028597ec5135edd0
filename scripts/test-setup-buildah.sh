#!/usr/bin/env bash
# Test preparation (run by `npm test`): make sure `buildah` and `debootstrap` exist for the container image test
# (test/deploy/image.test.ts). Installs Debian's packages only when a command is missing; starts nothing, builds
# nothing (the test builds the image and caches its bases, see docs/deploy.md). When installing is not possible it
# says so, and the image test skips loudly (and fails under CI=true).
set -u
. "$(dirname "$0")/apt-install-missing.sh"
missing=()
command -v buildah >/dev/null 2>&1 || missing+=(buildah)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
[ ${#missing[@]} -eq 0 ] || apt_install_missing test-setup-buildah "${missing[@]}"
exit 0
