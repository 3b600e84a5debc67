#!/usr/bin/env bash
# Install the Debian packages Tessera's real-part tests use, when run as root with apt-get.
# Never fails the build: without a package, the tests that need it skip with a message saying why.
set -u
want=()
command -v containerd >/dev/null || want+=(containerd)
command -v runc >/dev/null || [ -x /usr/sbin/runc ] || want+=(runc)
dpkg -s busybox-static >/dev/null 2>&1 || want+=(busybox-static)
command -v kubectl >/dev/null || want+=(kubernetes-client)
command -v ip >/dev/null || want+=(iproute2)
# The docs test runs the README's and docs' commands as written; they use curl and jq.
command -v curl >/dev/null || want+=(curl)
command -v jq >/dev/null || want+=(jq)
# The dashboard's browser tests drive a real headless Chromium (tests/support/browser.py).
command -v chromium >/dev/null || want+=(chromium)
# The monitoring tests run Debian's Prometheus and its promtool (tests/support/prometheus.py).
command -v prometheus >/dev/null && command -v promtool >/dev/null || want+=(prometheus)
[ ${#want[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "note: not root or no apt-get; not installing ${want[*]} (tests that need them will skip)" >&2
  exit 0
fi
echo "installing Debian packages: ${want[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -qq --no-install-recommends "${want[@]}" >/dev/null 2>&1; then
  apt-get update -qq >/dev/null 2>&1 || true
  apt-get install -y -qq --no-install-recommends "${want[@]}" >/dev/null 2>&1 \
    || echo "warning: could not install ${want[*]}; tests that need them will skip" >&2
fi
exit 0
