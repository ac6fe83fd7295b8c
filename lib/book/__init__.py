"""The book's presentation helpers, apart from the mathematics (``lib``, ``lib.pt``) and the planner.

- :mod:`lib.book.fmt`: how a chapter prints a number (only what the computation guarantees);
- :mod:`lib.book.figures`: the one figure style;
- :mod:`lib.book.widgets`: sliders in live Jupyter, panels in the book;
- :mod:`lib.book.equations`: each numbered equation of a chapter evaluated as displayed, or marked a definition.
"""
