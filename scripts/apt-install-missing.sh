# Sourced by scripts/test-setup-*.sh: `apt_install_missing WHAT PACKAGE...` installs Debian packages with apt-get
# (as root, or through passwordless sudo), updating the package lists once if the first attempt fails. It never
# fails the caller: when installing is impossible it prints why and that WHAT's tests will be skipped.
apt_install_missing() {
  local what="$1"
  shift
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo="sudo -n"; else
      echo "$what: $* missing and not root (no passwordless sudo); its tests will be skipped" >&2
      return 0
    fi
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "$what: $* missing and apt-get is not available; its tests will be skipped" >&2
    return 0
  fi
  echo "$what: installing $* (Debian packages)" >&2
  local install=($sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@")
  "${install[@]}" >/dev/null 2>&1 && return 0
  $sudo apt-get update -q >/dev/null 2>&1
  "${install[@]}" >/dev/null 2>&1 || echo "$what: could not install $*; its tests will be skipped" >&2
  return 0
}
