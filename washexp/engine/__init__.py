"""The run engine: a sweep's lifecycle, its launchers, the jobs' family of runs and the ledger of
what finished."""
