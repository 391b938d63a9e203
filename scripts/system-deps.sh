#!/usr/bin/env bash
# Installs the system packages the tests and the demo start for real: Redis 7, PostgreSQL 15,
# iproute2 (network namespaces for the aggregation-layer test address), Debian's python3 with
# redis, jsonschema, pytest, setuptools and pip for the Python client's tests (clients/python;
# jsonschema checks a queue's contract at enqueue), and Debian's
# chromium for the dashboard's browser tests (driven by playwright-core; never a browser
# download). Idempotent: installs
# only what is missing, so a warm machine pays nothing.
set -euo pipefail
need=()
command -v redis-server >/dev/null || need+=(redis-server)
command -v redis-cli >/dev/null || need+=(redis-tools)
[ -x /usr/lib/postgresql/15/bin/postgres ] || need+=(postgresql)
command -v ip >/dev/null || need+=(iproute2)
command -v openssl >/dev/null || need+=(openssl)
[ -x /usr/bin/chromium ] || need+=(chromium chromium-driver)
command -v /usr/bin/python3 >/dev/null || need+=(python3)
/usr/bin/python3 -c 'import redis' 2>/dev/null || need+=(python3-redis)
/usr/bin/python3 -c 'import jsonschema' 2>/dev/null || need+=(python3-jsonschema)
/usr/bin/python3 -c 'import pytest' 2>/dev/null || need+=(python3-pytest)
/usr/bin/python3 -c 'import setuptools' 2>/dev/null || need+=(python3-setuptools)
/usr/bin/python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip)
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" -ne 0 ]; then
  echo "system-deps: missing ${need[*]}; run as root or install them: apt-get install -y ${need[*]}" >&2
  exit 1
fi
echo "system-deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
# Debian starts the packaged services; the tests run their own throwaway instances instead.
for svc in redis-server postgresql; do
  (command -v systemctl >/dev/null && systemctl disable --now "$svc" >/dev/null 2>&1) || service "$svc" stop >/dev/null 2>&1 || true
done
echo "system-deps: done"
