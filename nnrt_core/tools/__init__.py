"""Tools built on the public API: the ``nnrt`` command line, benchmarks,
the profiler, the accuracy check and placement pictures."""
