#!/usr/bin/env bash
# Test setup (run by `npm test` before the suites): make sure an etcd answers on 127.0.0.1:2379.
# Idempotent and fast when one is already healthy. Installs Debian's etcd-server when missing (we are root on the
# project's machines and in CI). Data lives under test/.tmp/etcd (ignored by the test walker).
set -u
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ENDPOINT="http://127.0.0.1:2379"
DATA="$ROOT/test/.tmp/etcd"
LOG="$ROOT/test/.tmp/etcd.log"

healthy() {
  if command -v curl >/dev/null 2>&1; then
    curl -fsS --max-time 2 "$ENDPOINT/health" 2>/dev/null | grep -q '"health":"true"'
  else
    # No curl: use node (always present for this project) to ask /health.
    node -e "fetch('$ENDPOINT/health',{signal:AbortSignal.timeout(2000)}).then(r=>r.json()).then(j=>process.exit(j.health==='true'?0:1),()=>process.exit(1))" 2>/dev/null
  fi
}

if healthy; then
  echo "test-setup-etcd: etcd already healthy at $ENDPOINT"
  exit 0
fi

ETCD_BIN="$(command -v etcd || true)"
if [ -z "$ETCD_BIN" ] && [ -x /usr/bin/etcd ]; then ETCD_BIN=/usr/bin/etcd; fi
if [ -z "$ETCD_BIN" ]; then
  echo "test-setup-etcd: installing etcd-server (Debian package)"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y -q etcd-server >/dev/null 2>&1; then
    apt-get update -q >/dev/null 2>&1 || true
    apt-get install -y -q etcd-server >/dev/null || { echo "test-setup-etcd: could not install etcd-server" >&2; exit 0; }
  fi
  # The package may start a system service on its default port; that is fine as long as it answers.
  ETCD_BIN="$(command -v etcd || echo /usr/bin/etcd)"
  for _ in $(seq 1 20); do healthy && { echo "test-setup-etcd: etcd (system service) healthy"; exit 0; }; sleep 0.25; done
fi

mkdir -p "$DATA"
echo "test-setup-etcd: starting $ETCD_BIN (data: $DATA)"
# setsid + nohup: keep it running after this script (and npm test) exits.
setsid nohup "$ETCD_BIN" \
  --name cfgu-test \
  --data-dir "$DATA" \
  --listen-client-urls "$ENDPOINT" \
  --advertise-client-urls "$ENDPOINT" \
  --listen-peer-urls http://127.0.0.1:2380 \
  --initial-advertise-peer-urls http://127.0.0.1:2380 \
  --initial-cluster cfgu-test=http://127.0.0.1:2380 \
  >"$LOG" 2>&1 < /dev/null &

for _ in $(seq 1 80); do
  if healthy; then echo "test-setup-etcd: etcd healthy at $ENDPOINT"; exit 0; fi
  sleep 0.25
done
echo "test-setup-etcd: etcd did not become healthy in 20 s; see $LOG" >&2
tail -n 20 "$LOG" >&2 || true
# Not fatal here: the etcd suites skip loudly (and fail under CI=true) when etcd cannot be reached.
exit 0
