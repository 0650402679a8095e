"""The measurements: rounds (ceiling, infinity loop), sawtooth, controlled and chain, as MLflow runs."""
