"""Statistics across captures: before/after comparison with dependence-aware tests.

``resample``: block length from the autocorrelation, block bootstrap (one or
several captures per side), block summaries for rank tests.
``compare``: metrics of two groups of analyses, verdicts, attribution of the
transfer-period change to the gap kinds, text/JSON rendering.

The choices (and why plain i.i.d. tests are wrong on gap series) are
documented in docs/compare-and-report.md.
"""
