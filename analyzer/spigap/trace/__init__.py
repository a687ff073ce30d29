"""Kernel and user-space traces beside a capture (``spigap trace``, docs/trace.md).

columns.py   the one in-memory form of a trace (columnar, numpy), every parser's output
ftrace.py    text parsers: /sys/kernel/tracing/trace, trace_pipe, trace-cmd report, perf script
userlog.py   user-space timestamp CSVs (perf_counter_ns before/after each xfer2)
align/       matching trace events to bus transfers; the robust clock fit (offset + drift):
             one module per aligner (spi, sync, userlog), the matching and the fit they share
phases.py    every gap split into kernel phases on the merged timeline
perfetto.py  the merged timeline as a Chrome/Perfetto trace-event JSON
"""
