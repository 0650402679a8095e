"""How a compaction is made: S's extractive rule, H's checkpoint protocol (both implementations),
Jev's selection, the baselines, plugin methods, and the redaction H applies."""
