"""The fourteen-task compaction study: contexts, budgets, ranking, retention, grading."""
