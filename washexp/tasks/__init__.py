"""Task sets beyond the fourteen: generated compaction tasks with typed planted facts.

``facts`` (the kinds of fact, their values, renderings and needles: reusable by an importer),
``filler`` (the haystack), ``generate`` (one task and a whole set), ``manifest`` (a set's
identity and its check) and ``cli`` (``washexp tasks generate|verify``).
"""
