#!/usr/bin/env bash
# Test preparation (run by `npm test`): make sure `buildah` and `debootstrap` exist for the container image test
# (test/deploy/image.test.ts). Installs Debian's packages only when a command is missing; starts nothing, builds
# nothing (the test builds the image and caches its base, see docs/deploy.md). When installing is not possible it says
# so, and the image test skips loudly (and fails under CI=true).
set -u

missing=()
command -v buildah >/dev/null 2>&1 || missing+=(buildah)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
    echo "test-setup-buildah: ${missing[*]} missing and not root (no passwordless sudo); the image test will be skipped" >&2
    exit 0
  fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "test-setup-buildah: ${missing[*]} missing and apt-get is not available; the image test will be skipped" >&2
  exit 0
fi
echo "test-setup-buildah: installing ${missing[*]} (Debian packages)" >&2
if ! $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
  $SUDO apt-get update -q >/dev/null 2>&1
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null 2>&1 ||
    echo "test-setup-buildah: could not install ${missing[*]}; the image test will be skipped" >&2
fi
exit 0
