"""The wash records: what `washexp export` writes from the runs, and what `washexp compare` reads."""
