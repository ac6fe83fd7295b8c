#!/usr/bin/env bash
# Set up everything the book needs, idempotently: the virtual environment with requirements.txt installed
# (re-installed only when requirements.txt or pyproject.toml changed), npm (to fetch the pinned MathJax the
# offline book serves) and, with --test, the system browser the browser tests drive (Debian's chromium;
# Playwright's own browser download is never used).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
"$PYTHON" - <<'PY' || { echo "setup: Python 3.11 or newer is required (found $("$PYTHON" --version 2>&1))" >&2; exit 1; }
import sys
sys.exit(0 if sys.version_info >= (3, 11) else 1)
PY

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.requirements.sha256
want=$(cat requirements.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing requirements.txt into .venv"
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -r requirements.txt
  echo "$want" > "$stamp"
fi

# System packages, installed only when missing: npm fetches the pinned MathJax that the offline HTML serves
# (once; tools/build_book.py caches the tarball in ~/.cache/transformer-book-vendor), and --test adds
# Debian's chromium for the browser tests.
apt_pkgs=()
if ! command -v npm >/dev/null 2>&1 && ! ls "${BOOK_VENDOR_CACHE:-$HOME/.cache/transformer-book-vendor}"/mathjax-*.tgz >/dev/null 2>&1; then
  apt_pkgs+=(npm)
fi
if [ "${1:-}" = "--test" ] && ! command -v chromium >/dev/null 2>&1; then
  apt_pkgs+=(chromium)
fi
if [ ${#apt_pkgs[@]} -gt 0 ]; then
  echo "setup: installing ${apt_pkgs[*]} with apt-get"
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${apt_pkgs[@]}" >/dev/null
fi
