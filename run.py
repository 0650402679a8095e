#!/usr/bin/env python
"""Run washexp benchmarks: ``python run.py -m method=S,H topn=0..5`` (see README.md)."""

import sys

from washexp.app import main

if __name__ == "__main__":
    sys.exit(main())
