#!/usr/bin/env python
"""Run washexp benchmarks: ``python run.py -m method=S,H topn=0..5`` (see README.md)."""

import gc
from pathlib import Path

from washexp.app import leave, main

if __name__ == "__main__":
    code = main(root=Path(__file__).resolve().parent)  # this file's folder is the project
    gc.freeze()  # every run is closed: spare the exit a last collection over the whole heap (0.2 s)
    leave(code)
