"""Many captures at once: ``spigap batch``.

* ``discover``: command-line paths, directories and globs -> capture files
  (by the extensions the readers in ``spigap.io.READERS`` know);
* ``manifest``: per-file capture options and labels from a TOML or CSV file;
* ``worker``: one job -> one plain-dict result (``output.jsonout.to_dict``),
  errors caught and turned into one-line messages;
* ``execute``: run the jobs on a local process pool or on a Dask cluster;
* ``table``: one row per capture (text, CSV, JSON);
* ``matrix``: labels from file names or the manifest -> one metric per cell.

Everything here works on plain dicts once the workers are done: nothing
numpy-heavy crosses a process boundary.
"""

from __future__ import annotations

from spigap.batch.worker import Job, analyze_job

__all__ = ["Job", "analyze_job"]
