"""Build the HTML book, offline-ready, re-executing the chapters whenever their inputs changed.

Two things a plain ``jupyter-book build`` gets wrong for this book, and what this script does about them:

1. **Stale numbers.** Jupyter Book 1.x keeps executed outputs in ``_build/.jupyter_cache`` (myst-nb puts
   it next to the HTML output folder), keyed on a notebook's *code cells* only, and Sphinx re-reads a page
   only when its *source file* changed (its environment lives in ``_build/.doctrees``). An edit to
   ``lib/`` therefore leaves old outputs in the book twice over: clearing the execution cache alone does
   nothing, because Sphinx never asks for the unchanged notebook again. This script hashes every input a
   chapter's outputs depend on besides its own code (``lib/``, the requirements) and, when the hash differs
   from the one stored when the cache was last cleared, removes both the execution cache and the Sphinx
   environment, so every chapter is re-executed. When nothing changed, the cached outputs are reused and
   the build is fast. (If ``lib/`` changes *during* a build, rebuild: the hash is taken at the start.)
   ``tests/test_stale_outputs.py`` proves it on a throw-away copy.
2. **Offline HTML.** Sphinx links MathJax from a CDN by default. This script fetches MathJax from the npm
   registry once, pinned by version and checked against the registry's SHA-512 integrity string, unpacks it
   into ``_build/offline/_static/offline/mathjax-<version>/``, and ``_config.yml`` serves it from the built
   site (``html_extra_path`` copies the folder verbatim; ``mathjax_path`` points at it). It is not put under
   a source ``_static/`` folder because Jupyter Book 1.x adds a ``<script>`` tag for every ``.js`` file
   there, which would load hundreds of MathJax modules on every page. Nothing third-party is committed.

Usage: ``python tools/build_book.py [--strict]``. ``--strict`` turns warnings into errors (``-W -n
--keep-going``) and re-reads every page (``--all``; outputs still come from the cache), as the test command
does: Sphinx reports a page's warnings only when it reads the page. The environment variable
``BOOK_WIDGETS=static`` is set for the chapters' kernels so ``lib.widgets`` draws figures instead of sliders
(see that module).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "_build"
CACHE = BUILD / ".jupyter_cache"  # where myst-nb keeps executed notebooks: <outdir>/../.jupyter_cache
DOCTREES = BUILD / ".doctrees"  # the Sphinx environment: which pages are up to date

# Third-party assets served from the built site, pinned: (npm package, version, dist.integrity, folder in
# the tarball to keep, destination under _build/offline). Update the three pins together
# (`npm view mathjax@X dist.integrity`), and `mathjax_path` in _config.yml.
MATHJAX = (
    "mathjax",
    "3.2.2",
    "sha512-Bt+SSVU8eBG27zChVewOicYs7Xsdt40qm4+UpHyX7k0/O9NliPc+x77k1/FEsPsjKPZGJvtRZM1vO+geW0OhGw==",
    "package/es5",
    "_static/offline/mathjax-3.2.2",
)
OFFLINE = BUILD / "offline"  # html_extra_path in _config.yml: copied verbatim into _build/html
VENDOR_CACHE = Path(os.environ.get("BOOK_VENDOR_CACHE", Path.home() / ".cache" / "transformer-book-vendor"))


def inputs_digest(root: Path = ROOT) -> str:
    """SHA-256 over every file whose change can change a chapter's outputs without changing its code."""
    files = sorted(p for p in (root / "lib").rglob("*.py") if "__pycache__" not in p.parts)
    files += [p for p in (root / "requirements.txt", root / "pyproject.toml") if p.exists()]
    h = hashlib.sha256()
    for p in files:
        h.update(p.relative_to(root).as_posix().encode())
        h.update(b"\0")
        h.update(p.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def clear_stale_outputs(build: Path, digest: str) -> bool:
    """Remove the execution cache and the Sphinx environment if ``digest`` differs from the stored one.

    Stores ``digest`` and returns True when they were removed (every chapter will be re-executed).
    """
    stamp = build / ".inputs.sha256"
    previous = stamp.read_text().strip() if stamp.exists() else None
    if previous == digest:
        return False
    for d in (build / ".jupyter_cache", build / ".doctrees", build / "jupyter_execute"):
        if d.exists():
            shutil.rmtree(d)
    # From now on the cache only ever holds outputs of the current inputs, even if the build that follows
    # fails or is interrupted, so the stamp is written now: a failed build's next run does not start over.
    build.mkdir(parents=True, exist_ok=True)
    stamp.write_text(digest + "\n")
    return True


def _npm_tarball(name: str, version: str, integrity: str) -> bytes:
    """The npm tarball of ``name@version``, from a local cache or the registry, checked against ``integrity``."""
    algo, _, want_b64 = integrity.partition("-")
    want = base64.b64decode(want_b64)
    cached = VENDOR_CACHE / f"{name}-{version}.tgz"
    if cached.exists():
        data = cached.read_bytes()
        if hashlib.new(algo, data).digest() == want:
            return data
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit(
            f"build_book: npm is needed once to fetch {name}@{version} (the offline MathJax); install Node.js "
            f"and npm (Debian: apt-get install npm), or put the tarball at {cached}"
        )
    with tempfile.TemporaryDirectory() as tmp:
        print(f"build_book: fetching {name}@{version} from the npm registry (once; cached in {VENDOR_CACHE})")
        subprocess.run([npm, "pack", f"{name}@{version}", "--pack-destination", tmp, "--silent"], check=True,
                       stdout=subprocess.DEVNULL)
        data = (Path(tmp) / f"{name}-{version}.tgz").read_bytes()
    got = hashlib.new(algo, data).digest()
    if got != want:
        raise SystemExit(
            f"build_book: {name}@{version} from npm has {algo} {base64.b64encode(got).decode()}, "
            f"expected {want_b64}: refusing to use it"
        )
    VENDOR_CACHE.mkdir(parents=True, exist_ok=True)
    cached.write_bytes(data)
    return data


def vendor_offline_assets(offline: Path = OFFLINE) -> None:
    """Unpack the pinned MathJax into ``offline`` (idempotent: skipped when the version is already there)."""
    name, version, integrity, member, dest = MATHJAX
    target = offline / dest
    marker = target / ".complete"
    if marker.exists():
        return
    if target.exists():
        shutil.rmtree(target)
    data = _npm_tarball(name, version, integrity)
    prefix = member.rstrip("/") + "/"
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for m in tar.getmembers():
            if not m.isfile() or not m.name.startswith(prefix):
                continue
            out = target / m.name[len(prefix):]
            if ".." in Path(m.name).parts:
                raise SystemExit(f"build_book: unsafe path {m.name!r} in {name}-{version}.tgz")
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(tar.extractfile(m).read())
    if not (target / "tex-mml-chtml.js").exists():
        raise SystemExit(f"build_book: {name}-{version}.tgz has no {member}/tex-mml-chtml.js")
    marker.write_text(f"{name}@{version}\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--strict", action="store_true", help="fail on any warning (-W -n --keep-going)")
    args = ap.parse_args(argv)

    BUILD.mkdir(exist_ok=True)
    vendor_offline_assets()
    digest = inputs_digest()
    if clear_stale_outputs(BUILD, digest):
        print("build_book: lib/ or the requirements changed since the last successful build (or there was "
              "none): re-executing every chapter")

    cmd = [str(Path(sys.executable).parent / "jupyter-book"), "build", str(ROOT)]
    if args.strict:
        # --all: a fresh Sphinx environment, so every page is read again (from the execution cache, not
        # re-executed) and reports its warnings; otherwise an unchanged page that has a warning passes.
        cmd += ["-W", "-n", "--keep-going", "--all"]
    env = dict(os.environ, BOOK_WIDGETS="static")
    rc = subprocess.call(cmd, cwd=ROOT, env=env)
    if rc != 0:
        print(f"build_book: jupyter-book build failed (exit {rc})", file=sys.stderr)
        return rc
    print(f"build_book: the book is at {BUILD / 'html' / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
