#!/usr/bin/env python3
"""TorchBench-compatible entry point: `python run.py -m hf_Reformer -d cuda -t train`.
Everything lives in runner/ (see runner/cli.py); models in models/<name>/."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from runner.cli import main  # noqa: E402

if __name__ == "__main__":
	sys.exit(main())
