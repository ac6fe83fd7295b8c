"""Speed and memory of the book's attention implementations, measured side by side (``make bench``).

Run from the repository root: ``python -m benchmarks`` (``--help`` for the options, ``--build`` to also time
the book build and the full test command). Results are printed as a table and written as JSON to
``benchmarks/results/``. These are measurements, not tests: nothing here runs under pytest, and no test
asserts a timing. Every ratio compares figures taken in the same run, one after the other, so that it holds
on a machine whose load changes while it runs.
"""
