#!/usr/bin/env bash
# The inspector's browser tests drive Debian's headless Chromium (tests/api/test_inspector_browser.py).
# Installs it when missing and this is a Debian-like system with root; otherwise says how.
set -euo pipefail
if [ -n "${EBBTIDE_CHROMIUM:-}" ] || command -v chromium >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "ebbtide: installing Debian's chromium package for the browser tests"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq chromium >/dev/null
    exit 0
fi
echo "ebbtide: the browser tests need Chromium: install Debian's chromium package" \
     "(sudo apt-get install chromium), or set EBBTIDE_CHROMIUM to a Chromium binary" >&2
exit 1
