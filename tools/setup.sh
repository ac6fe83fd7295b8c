#!/usr/bin/env bash
# Set up everything the book needs, idempotently, with Python 3.11+ and pip (which fetches uv) alone: the virtual
# environment with the locked requirements (requirements.lock, re-installed only when the lock or pyproject.toml
# changed) and
# the book's own library in editable mode. MathJax for the offline book comes from a pip package
# (sphinx-mathjax-offline): no npm, no root. The lock is installed by uv (a single wheel that pip fetches first,
# from the same index), which installs the ~190 pinned packages in parallel for a fraction of pip's CPU time,
# told pip's own indexes, links and constraints (pip.conf, PIP_* variables); when uv cannot be had or fails,
# pip installs the lock as before (BOOK_PIP_ONLY=1 forces pip).
#
# With --test, also what the tests run besides Python: Node (the in-page calculator's tests; `node` on the PATH,
# else Debian's nodejs; --check provides Node alone, for make check), the browser the browser tests drive (an existing Chromium: $CHROMIUM, or chromium /
# chromium-browser on the PATH, else Debian's chromium) and poppler's pdftotext (the PDF test), each through
# apt-get when this machine has apt-get and root (or sudo). BOOK_SKIP_BROWSER=1 skips the browser and PDF tests
# instead, and says so; Node is needed either way. Playwright's own browser download is never used.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
  echo "setup: Python 3.11 or newer is required (found: $("$PYTHON" --version 2>&1 || echo none))" >&2
  exit 1
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $("$PYTHON" --version)"
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.requirements.sha256
want=$(.venv/bin/python -c 'import hashlib, sys; print(hashlib.sha256(b"".join(open(p, "rb").read() for p in sys.argv[1:])).hexdigest())' requirements.lock pyproject.toml)
UV_VERSION=0.13.9

# pip's configuration (`pip config list`: pip.conf files and PIP_* variables, later lines winning) as uv's
# options, one per line: the indexes, links and constraints pip would use, so that uv installs the same files
pip_config_as_uv_options() {
  .venv/bin/python - <<'PYEOF'
import subprocess, sys
listing = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
conf = {}
for line in listing.splitlines():
    key, sep, value = line.partition("=")
    if sep:
        conf[key.rpartition(".")[2]] = value.strip().strip("'\"")
for key in ("index-url", "extra-index-url", "find-links", "constraint"):
    for value in conf.get(key, "").split():
        print(f"--{key}\n{value}")
if conf.get("no-index", "").lower() in ("1", "true", "yes", "on"):
    print("--no-index")
PYEOF
}

install_with_uv() {
  .venv/bin/python -m pip install --quiet "uv==$UV_VERSION" >> .venv/pip-install.log 2>&1 || return 1
  local -a opts
  mapfile -t opts < <(pip_config_as_uv_options)
  local cert
  cert=$(.venv/bin/python -m pip config get global.cert 2>/dev/null || true)
  cert=${PIP_CERT:-$cert}
  # unsafe-best-match: the highest version across every index and link, as pip picks it (a local build such as
  # torch 2.13.0+cpu satisfies torch==2.13.0 and sorts above it)
  # No --compile-bytecode: compiling all of site-packages took about 70 CPU s here (transformers, torch, sympy and
  # pandas alone hold 150 MB of Python, most of it never imported). Python compiles a module when it is first
  # imported and keeps the .pyc, provided PYTHONDONTWRITEBYTECODE is not set (the Makefile and the test scripts
  # unset it; the project's machines set it), and the import below compiles the common part once, here.
  SSL_CERT_FILE=${cert:-${SSL_CERT_FILE:-}} .venv/bin/uv pip install --python .venv/bin/python \
      --index-strategy unsafe-best-match "${opts[@]}" -r requirements.lock 2>&1 | tee -a .venv/pip-install.log \
    | awk '/^(Resolved|Prepared|Installed|Uninstalled|error)/ { print "  uv: " substr($0, 1, 150); fflush() }' \
    || return 1
  SSL_CERT_FILE=${cert:-${SSL_CERT_FILE:-}} .venv/bin/uv pip install --quiet --python .venv/bin/python \
      --index-strategy unsafe-best-match "${opts[@]}" --no-deps -e . >> .venv/pip-install.log 2>&1
}

install_with_pip() {
  .venv/bin/python -m pip install --quiet --upgrade pip >> .venv/pip-install.log 2>&1
  # one line per package while it installs (the full log stays in .venv/pip-install.log); pipefail keeps pip's
  # exit status
  .venv/bin/python -m pip install -r requirements.lock 2>&1 | tee -a .venv/pip-install.log \
    | awk '/^(Collecting|Installing collected|Successfully installed|ERROR)/ { print "  " substr($0, 1, 150); fflush() }'
  .venv/bin/python -m pip install --quiet --no-deps -e . >> .venv/pip-install.log 2>&1 \
    || { tail -20 .venv/pip-install.log >&2; echo "setup: installing the book's library failed" >&2; exit 1; }
}

if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  t0=$SECONDS
  : > .venv/pip-install.log
  if [ "${BOOK_PIP_ONLY:-0}" = "1" ]; then
    echo "setup: installing requirements.lock into .venv with pip (BOOK_PIP_ONLY=1; a few minutes the first time)"
    install_with_pip
  else
    echo "setup: installing requirements.lock into .venv with uv $UV_VERSION"
    if ! install_with_uv; then
      echo "setup: uv did not install the lock (see .venv/pip-install.log); installing it with pip" \
           "(a few minutes the first time)"
      install_with_pip
    fi
  fi
  # the check that the install works, and the first import (so the bytecode) of what every chapter, test and build
  # uses, in one process rather than in the first few processes of a run at once
  env -u PYTHONDONTWRITEBYTECODE .venv/bin/python -c "import jupyter_book, torch, numpy, nbval, lib, lib.pt.model, \
lib.sizing, transformers, sympy, pandas, matplotlib.pyplot, IPython, ipykernel.kernelapp, pytest, hypothesis, \
sphinx.application, myst_nb" || { echo "setup: installation failed" >&2; exit 1; }
  echo "$want" > "$stamp"
  echo "setup: .venv ready ($((SECONDS - t0)) s)"
fi

# The chapters' kernels (book build, nbval, tools/chapters.py) listen on 127.0.0.1 only; ipykernel's warning about
# unencrypted TCP, printed once per kernel, is about kernels reached over a network. Quiet it in this venv only.
mkdir -p .venv/etc/ipython
echo 'c.IPKernelApp.log_level = "ERROR"  # written by tools/setup.sh' > .venv/etc/ipython/ipython_kernel_config.py

# JupyterLab (`.venv/bin/jupyter lab`) shows the glued numbers in the chapters' prose: jupyterlab-myst renders the
# MyST but does not know myst-nb's glue, so the book's contents manager puts the stored values in. Its settings are
# the repository's jupyter_config/jupyter_server_config.py, which this environment's configuration loads.
mkdir -p .venv/etc/jupyter
cat > .venv/etc/jupyter/jupyter_server_config.py <<PYEOF
# written by tools/setup.sh: the book's JupyterLab settings
load_subconfig("$(pwd)/jupyter_config/jupyter_server_config.py")  # noqa: F821
PYEOF

# Debian's package $1 through apt-get, as root or with sudo, for $2 (what needs it); when this machine has neither
# apt-get nor a way to root, fails with a line saying that there is no $3
apt_install() {
  if command -v apt-get >/dev/null 2>&1 && { [ "$(id -u)" = 0 ] || command -v sudo >/dev/null 2>&1; }; then
    echo "setup: installing Debian's $1 with apt-get ($2)"
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$1" >/dev/null
  else
    echo "setup: no $3, for $2 (Debian: apt-get install $1)" >&2
    exit 1
  fi
}

# Node runs the in-page calculator (lib/planner/web/planner.js) against the Python planner in the library tests
# (tests/test_planner_node.py), which fail without it: both loops need it (make check: --check, make test: --test).
if [ "${1:-}" = "--test" ] || [ "${1:-}" = "--check" ]; then
  command -v node >/dev/null 2>&1 || apt_install nodejs "the library tests of the in-page calculator" "node"
fi
if [ "${1:-}" = "--test" ]; then
  if [ "${BOOK_SKIP_BROWSER:-0}" = "1" ]; then
    echo "setup: BOOK_SKIP_BROWSER=1: no browser set up; the browser tests will be skipped"
  elif [ -n "${CHROMIUM:-}" ] && [ -x "${CHROMIUM}" ]; then
    :
  elif command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
    :
  else
    apt_install chromium "the browser tests" "Chromium (set CHROMIUM=/path/to/chromium, put chromium on the PATH, \
or run with BOOK_SKIP_BROWSER=1 to skip the browser tests)"
  fi
  # The PDF test reads the book's PDF with poppler's pdftotext (pypdf's text extraction takes minutes on it).
  if [ "${BOOK_SKIP_BROWSER:-0}" != "1" ] && ! command -v pdftotext >/dev/null 2>&1; then
    apt_install poppler-utils "the PDF test" "pdftotext"
  fi
  # The PDF's body font, TeX Gyre Pagella (without it the PDF falls back to DejaVu Serif)
  if [ "${BOOK_SKIP_BROWSER:-0}" != "1" ] && ! fc-list 2>/dev/null | grep -qi "TeX Gyre Pagella"; then
    apt_install fonts-texgyre "the PDF's body font" "TeX Gyre Pagella"
  fi
fi
