"""Profiling a compiled model's runs: the Chrome/Perfetto trace of
``Session.profile`` (:mod:`~nnrt_core.profiling.profiler`) and the latency
projection of simulated devices (:mod:`~nnrt_core.profiling.projection`).
Above the compiler and the runtime, below ``Session`` and the tools."""
