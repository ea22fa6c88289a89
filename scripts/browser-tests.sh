#!/usr/bin/env bash
# Runs the browser tests of the pages a bank customer sees (e2e/browser): the local server in
# Debian's Chromium, driven by playwright-core, with axe-core. On a fresh Debian machine it first
# installs what they need: Chromium and ChromeDriver from Debian's packages (only when
# /usr/bin/chromium is missing; no browser is ever downloaded by a test tool) and the pinned npm
# packages of e2e/browser/package-lock.json. Exits non-zero when anything fails.
#
#   scripts/browser-tests.sh            install if needed, then run the tests
#   AUTHSERVER_BIN=path scripts/...     test an already built cmd/authserver instead of building it
#   KEEP_TMP=1 scripts/...              keep the server's data directory and log for inspection
#
# Screenshots of every page at phone and desktop width land in e2e/browser/screenshots/.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

as_root() {
	if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

if [ ! -x /usr/bin/chromium ]; then
	echo "browser-tests: installing Debian's chromium and chromium-driver"
	as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium chromium-driver
fi
/usr/bin/chromium --version 2>/dev/null | head -n1 || true

if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
	export PATH="$PATH:/usr/local/go/bin"
fi
for tool in node npm go; do
	command -v "$tool" >/dev/null 2>&1 || { echo "browser-tests: $tool is not installed" >&2; exit 1; }
done

cd "$root/e2e/browser"
echo "browser-tests: npm ci (node $(node --version))"
npm ci --no-audit --no-fund --loglevel=error

echo "browser-tests: running"
npm test
