"""tbprof's TorchBench-compatible runner: model discovery, the measurement
loop and the command line behind the repository's run.py."""
