"""``spigap batch PATH|GLOB ...``: many captures in parallel, one row each, matrices by label."""

from __future__ import annotations

import argparse
import os
import sys

from spigap.cli.common import (
    add_capture_options,
    add_output_options,
    add_stall_options,
    capture_option_parser,
    check_output_path,
    config_from_args,
    count,
    reader_options,
    stall_rule_from_args,
    write_output,
)
from spigap.errors import SpigapError, UsageError

ORDER = 15


def _csv_list(text: str) -> list[str]:
    items = [t.strip() for t in text.split(",")]
    if not all(items):
        raise argparse.ArgumentTypeError(f"give names separated by commas, got {text!r}")
    return items


def _field_order(text: str) -> tuple[str, list[str]]:
    field, sep, values = text.partition("=")
    if not sep or not field.strip():
        raise argparse.ArgumentTypeError(f"give FIELD=V1,V2,..., got {text!r}")
    return field.strip(), _csv_list(values)


def _timeout(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0 (0 = no limit), not {text!r}")
    return value


def add_subparser(sub) -> None:
    p = sub.add_parser(
        "batch", help="analyze many captures in parallel: a row per capture, a matrix per metric",
        description="Analyze every capture given (files, directories, globs) on all cores, "
                    "print one summary row per capture and, with labels from the file names or "
                    "a manifest, a matrix of one metric (e.g. kernel x load x SCLK). A bad "
                    "capture becomes an error row; the others still finish. Exit status 0 when "
                    "every capture was analyzed, 2 when any failed. See docs/batch.md.")
    p.add_argument("inputs", nargs="*", metavar="PATH|GLOB",
                   help="capture files, directories (searched recursively) or globs ('caps/**/*.sr')")
    p.add_argument("--manifest", metavar="FILE",
                   help="TOML or CSV with per-file capture options and labels (docs/batch.md); "
                        "without PATH arguments its entries are the captures")
    add_capture_options(p)
    add_stall_options(p)
    g = p.add_argument_group("matrix (group captures by labels)")
    g.add_argument("--pattern", metavar="PAT",
                   help="labels from file names: '{kernel}-{load}-{sclk}.sr' ({} and * match anything)")
    g.add_argument("--regex", metavar="RE",
                   help="labels from paths by named groups: '(?P<kernel>smp|rt)/(?P<sclk>[^/]+)\\.sr'")
    g.add_argument("--fields", type=_csv_list, metavar="F1,F2,...",
                   help="the labels to group by, in order; alone: the file name split at --sep")
    g.add_argument("--sep", default="-", metavar="TEXT", help="separator for --fields alone (default '-')")
    g.add_argument("--rows", type=_csv_list, metavar="F,...", help="row labels (default: the last field)")
    g.add_argument("--cols", type=_csv_list, metavar="F,...", help="column labels (default: the other fields)")
    g.add_argument("--order", action="append", type=_field_order, default=[], metavar="FIELD=V1,V2,...",
                   help="order of a label's values in the matrix (default: by value, then "
                        "alphabetically), e.g. --order kernel=smp,rt (repeatable)")
    g.add_argument("--metric", action="append", metavar="NAME",
                   help="value per cell (repeatable): transfer_rate_hz (default), "
                        "context_switch.p99_s, cs_setup.p50_s, stalls, ... (--list-metrics)")
    g.add_argument("--reduce", choices=("median", "mean", "min", "max"), default="median",
                   help="several captures in one cell: their median (default), mean, min or max")
    g.add_argument("--list-metrics", action="store_true", help="print the metric names and exit")
    e = p.add_argument_group("execution")
    e.add_argument("-j", "--jobs", type=count, metavar="N",
                   help="worker processes (default: one per core; 1 = no pool, in this process)")
    e.add_argument("--dask-scheduler", metavar="ADDR",
                   help="run on an existing Dask cluster, e.g. tcp://host:8786 (workers need the "
                        "same file paths and spigap installed)")
    e.add_argument("--timeout", type=_timeout, default=None, metavar="SECONDS",
                   help="time limit per capture; a capture over it becomes an error row (default: "
                        "60 s + 1 s per MiB of the file; 0 = no limit)")
    e.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    o = add_output_options(p, ("text", "csv", "json"),
                           output_help="write here instead of stdout: the text table (+ matrices), "
                                       "the CSV rows or the JSON document (--format)")
    o.add_argument("--matrix-csv", metavar="FILE", help="also write the matrices as CSV")
    o.add_argument("--csv", metavar="FILE",
                   help="deprecated, kept as an alias: also write the rows as CSV (use --format csv -o FILE)")
    o.add_argument("--json", metavar="FILE",
                   help="deprecated, kept as an alias: also write everything as JSON (use --format json -o FILE)")
    p.set_defaults(func=run)


def _warn(text: str) -> None:
    print(f"spigap: warning: {text}", file=sys.stderr)


def make_jobs(args, found, fields, manifest) -> list:
    """One Job per capture: the command-line options, overridden per file by the manifest."""
    from spigap.batch import manifest as manifest_mod
    from spigap.batch import worker as worker_mod
    from spigap.batch.worker import Job

    parser = capture_option_parser()
    used: set[int] = set()
    rule = stall_rule_from_args(args)
    jobs = []
    for i, f in enumerate(found):
        job = Job(index=i, path=f.path, error=f"{f.path}: {f.error}" if f.error else None, files=f.files)
        # an acquisition saved as several files: labels from its first file's name, the
        # manifest's entries that match any of its files
        labels = dict(fields.labels(f.files[0] if f.files else f.path) or {})
        ns = args
        if manifest is not None:
            options, mlabels, hits = manifest.lookup(f.files or f.path)
            used.update(id(h) for h in hits)
            labels.update(mlabels)
            if options and job.error is None:
                try:
                    ns = manifest_mod.apply_options(args, options, parser=parser, path=manifest.path)
                except SpigapError as e:
                    job.error = f"{f.path}: {e}"
        job.labels = labels
        job.stall_rule = rule
        if job.error is None:
            try:
                job.cfg = config_from_args(ns)
                job.reader = reader_options(ns)
            except SpigapError as e:
                job.error = f"{f.path}: {e}"
        if f.files:
            job.file = [os.path.abspath(p) for p in f.files] if args.dask_scheduler else list(f.files)
        else:
            job.file = os.path.abspath(f.path) if args.dask_scheduler else f.path
        limit = getattr(args, "timeout", None)
        job.timeout_s = (worker_mod.default_timeout(job.file) if limit is None else limit) or None
        jobs.append(job)
    if manifest is not None:
        for entry in manifest.entries:
            if id(entry) not in used:
                _warn(f"{manifest.path}: {entry.where} ({entry.pattern}) matches no capture of this batch")
    return jobs


def _grouping(args, jobs, fields):
    """Matrix axes (rows, cols) or None when no matrix is asked for."""
    from spigap.batch import matrix

    wanted = fields.kind is not None or args.rows or args.cols
    if not wanted:
        return None
    known: list[str] = list(fields.names)
    for j in jobs:
        for k in j.labels:
            if k not in known:
                known.append(k)
    if not known:
        raise UsageError("no labels to group by",
                         hint="give --pattern, --regex or --fields, or labels in a --manifest")
    # the default axes come from the fields named on the command line; a
    # manifest's labels (often sparse) take part only when named in --rows/--cols
    order = list(args.fields or fields.names)
    for f in [*order, *(args.rows or []), *(args.cols or []), *(f for f, _ in args.order)]:
        if f not in known:
            raise UsageError(f"no label {f!r}", hint=f"known: {', '.join(known)}")
    rows, cols = matrix.axes(order, args.rows, args.cols)
    overlap = set(rows) & set(cols)
    if overlap:
        raise UsageError(f"{', '.join(sorted(overlap))} is both a row and a column label")
    if not rows and not cols:
        raise UsageError("the matrix has no axis", hint="give --rows and/or --cols")
    return rows, cols


def run(args) -> int:
    from spigap.batch import discover, execute, matrix, table, worker
    from spigap.batch import manifest as manifest_mod
    from spigap.batch.worker import NOT_ANALYZED
    from spigap.cli import guard

    if args.list_metrics:
        print("\n".join(table.metric_names()))
        return 0

    # everything the user can get wrong is checked before the first capture is opened
    metrics = []
    for name in args.metric or ["transfer_rate_hz"]:
        try:
            metrics.append(table.parse_metric(name))
        except ValueError as e:
            raise UsageError(str(e), hint="see 'spigap batch --list-metrics'") from None
    fields = matrix.FieldSource(pattern=args.pattern, regex=args.regex,
                                fields=args.fields if not (args.pattern or args.regex) else None,
                                sep=args.sep)
    config_from_args(args)                # contradicting command-line options: fail now, once
    for out in (args.output, args.csv, args.json, args.matrix_csv):
        check_output_path(out)
    manifest = manifest_mod.load(args.manifest, capture_option_parser()) if args.manifest else None
    inputs = list(args.inputs)
    if not inputs:
        if manifest is None:
            raise UsageError("give capture files, directories or globs (or a --manifest naming them)")
        inputs = manifest.capture_paths()
    skipped: list[str] = []
    found = discover.expand(inputs, input_format=args.input_format, skipped=skipped,
                            exclude=[args.manifest] if args.manifest else [])
    guard.recheck(args, [p for f in found if f.error is None for p in (f.files or [f.path])])
    if skipped:
        _warn(f"skipped {len(skipped)} file(s) no reader recognizes: "
              + ", ".join(os.path.basename(p) for p in skipped[:5]) + (" ..." if len(skipped) > 5 else "")
              + " (name them explicitly to analyze them anyway)")
    jobs = make_jobs(args, found, fields, manifest)
    axes = _grouping(args, jobs, fields)
    if args.matrix_csv and axes is None:
        raise UsageError("--matrix-csv needs a matrix", hint="give --pattern, --regex, --fields or --rows/--cols")

    results: list[dict] = []
    from tqdm import tqdm

    # the bar draws with \r: it gets stderr itself, not the one-line escaping of outfile.std_streams
    bar = tqdm(total=len(jobs), unit="capture", file=getattr(sys.stderr, "unescaped", sys.stderr),
               dynamic_ncols=True, leave=False,
               disable=args.quiet or not sys.stderr.isatty())
    failed = 0

    def on_result(r: dict) -> None:
        nonlocal failed
        results.append(r)
        if r["status"] in NOT_ANALYZED:
            failed += 1
            bar.set_postfix(failed=failed, refresh=False)
        bar.update(1)

    runnable = [j for j in jobs if j.error is None]
    try:
        for j in jobs:
            if j.error is not None:
                on_result(worker.analyze_job(j))     # returns its error row at once
        if runnable and args.dask_scheduler:
            execute.run_dask(runnable, on_result, scheduler=args.dask_scheduler)
        elif runnable and args.jobs == 1:
            execute.run_inline(runnable, on_result)
        elif runnable:
            execute.run_local(runnable, on_result, workers=args.jobs)
    finally:
        bar.close()
    results.sort(key=lambda r: r["index"])
    results = table.per_device(results)         # a shared bus: a row per device

    matrices = []
    if axes is not None:
        rows, cols = axes
        orders = dict(args.order)
        matrices = [matrix.build(results, m, rows, cols, args.reduce, orders) for m in metrics]
    extra = {"backend": args.dask_scheduler and f"dask {args.dask_scheduler}" or "local",
             "manifest": args.manifest,
             "grouping": fields.describe() or ("manifest labels" if axes else None)}
    if args.format == "json":
        text = table.render_json(results, matrices=matrices, extra=extra)
    elif args.format == "csv":
        text = table.render_csv(results)
    else:
        text = table.render_text(results) + "".join("\n" + matrix.render_text(m) for m in matrices)
    write_output(text, args.output)
    if args.csv:
        write_output(table.render_csv(results), args.csv)
    if args.json:
        write_output(table.render_json(results, matrices=matrices, extra=extra), args.json)
    if args.matrix_csv:
        write_output(matrix.render_csv(matrices), args.matrix_csv)

    bad = [r for r in {r["index"]: r for r in results}.values() if r["status"] in NOT_ANALYZED]
    if bad:
        print(f"spigap: error: {len(bad)} of {len(jobs)} captures not fully analyzed "
              "(see the error rows)", file=sys.stderr)
        return 2
    return 0
