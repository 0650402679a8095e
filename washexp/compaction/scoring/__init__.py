"""What a context kept and what a reader answered: model-free retention, strict grading, the
per-fact loss ledger and the study's hierarchical means."""
