"""The CoalWash memory-wash fidelity benchmark.

Where things are (each folder's ``__init__`` says more):

- ``washer.py``, ``plan.py``, ``pipeline.py``: one wash. A washer proposes a plan; the pipeline
  screens it (pins, gates, the operator) and applies it. A new washer goes in ``washers/``.
- ``coalwash/``: CoalWash's rules, ported output for output (scorer, gate, pins, keeps, caliper,
  gauges, recall, quick tier, human gate).
- ``store/``: memory stores and growth feeds as files, and the transaction that changes a store.
- ``measure/``: the measurements as MLflow runs (ceiling, infinity loop, sawtooth, controlled,
  chain). A new measurement goes here.
- ``records/``: what ``washexp export`` writes from the runs and ``washexp compare`` reads.
- ``cli/``: ``washexp wash`` and ``washexp recall``.
"""
