# The two commands of the README. Both set up what they need (tools/setup.sh is idempotent).
# Python keeps the bytecode it compiles (.venv holds none until a module is first imported: tools/setup.sh),
# even where the environment says not to.
unexport PYTHONDONTWRITEBYTECODE
.PHONY: book test check pdf bench clean

book:  ## Build the HTML book into _build/html, executing every chapter whose inputs changed.
	bash tools/setup.sh
	.venv/bin/python tools/build_book.py

test:  ## Every test: lint, stale outputs, lib tests, nbval here and on a simulated other machine, strict build, browser.
	bash tools/test.sh --setup

check:  ## The quick loop: lint, stale outputs, prose numbers, equations, lib tests, nbval of the chapters affected since BASE.
	bash tools/setup.sh --check
	bash tools/check.sh

pdf:  ## The whole book as one PDF, _build/pdf/book.pdf (the single-page HTML printed by Chromium; needs a Chromium).
	bash tools/setup.sh --test
	.venv/bin/python tools/build_pdf.py

bench:  ## Run the benchmarks (not part of the tests).
	bash tools/setup.sh
	.venv/bin/python -m benchmarks

clean:
	rm -rf _build
