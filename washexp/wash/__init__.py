"""The CoalWash memory-wash fidelity benchmark: stores and feeds, scorer, caliper, gauge,
tiers, washers, gates, apply, measurements, record."""
