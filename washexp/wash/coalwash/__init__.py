"""CoalWash's rules, ported: the scorer, the fidelity gate, pins and keeps, the caliper and gauges,
recall, the quick tier and the human gate."""
