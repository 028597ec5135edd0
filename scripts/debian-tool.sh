#!/usr/bin/env bash
# Shared by the test-setup scripts: `ensure_debian_tool TOOL PACKAGE [FOLDER]` makes sure the executable TOOL exists,
# on PATH, in /usr/bin, or unpacked from Debian's PACKAGE into a user cache folder ($XDG_CACHE_HOME or ~/.cache, then
# cfgu-test/FOLDER/usr/bin; FOLDER defaults to TOOL). The package is downloaded (apt-get download) and unpacked (dpkg-deb -x) only when the tool
# is missing: no root needed, nothing installed system-wide, no service started. When that is not possible it says
# so, and the tests that need the tool skip loudly (and fail under CI=true). It never fails the run itself.
ensure_debian_tool() {
  local tool="$1" package="$2" folder="${3:-$1}"
  if command -v "$tool" >/dev/null 2>&1 || [ -x "/usr/bin/$tool" ]; then
    return 0
  fi
  local cache="${XDG_CACHE_HOME:-$HOME/.cache}/cfgu-test/$folder"
  if [ -x "$cache/usr/bin/$tool" ]; then
    return 0
  fi
  if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-deb >/dev/null 2>&1; then
    echo "test-setup: $tool is missing and apt-get/dpkg-deb are not available; the tests that need it will be skipped" >&2
    return 0
  fi
  echo "test-setup: downloading $package (Debian package) into $cache" >&2
  local work
  work="$(mktemp -d)"
  if (cd "$work" && apt-get download -q "$package" >/dev/null 2>&1); then
    mkdir -p "$cache" && dpkg-deb -x "$work/${package}"_*.deb "$cache"
  fi
  rm -rf "$work"
  [ -x "$cache/usr/bin/$tool" ] || echo "test-setup: could not fetch $package; the tests that need $tool will be skipped" >&2
  return 0
}
