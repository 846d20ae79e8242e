"""Running a compiled model: the executor, feeds, streams and run pools,
thread budgets, zero-copy tensors and memory plans."""
