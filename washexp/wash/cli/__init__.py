"""The wash benchmark's own commands: `washexp wash`, `washexp recall`."""
