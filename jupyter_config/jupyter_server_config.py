"""The book's JupyterLab settings: the contents manager that opens a chapter as the book's page shows it (glued
numbers, citations, figure numbers, hidden cells folded) and saves it unchanged (``book_contents.py``, beside
this file).

``tools/setup.sh`` makes ``.venv/bin/jupyter lab`` load this file (``.venv/etc/jupyter/jupyter_server_config.py``);
elsewhere: ``jupyter lab --config jupyter_config/jupyter_server_config.py``.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
c = get_config()  # noqa: F821  (Jupyter's configuration files are run with get_config defined)
c.ServerApp.contents_manager_class = "book_contents.BookContentsManager"
