#!/usr/bin/env python
"""``python scripts/rebuild-records.py results``: rebuild every record under a folder that has a
bundle, from its bundle alone, with this checkout's code, and write its files under the record's
own name (a record may be kept under another stem than it builds). For a change to how records are
built: the committed records then carry it, and ``washexp verify`` passes on each."""

import json
import sys
from pathlib import Path

from washexp.verify import recompute

root = Path(sys.argv[1])
for bundle in sorted(root.rglob("*.bundle")):
    path = bundle.with_suffix(".json")
    record = json.loads(path.read_text(encoding="utf-8"))
    rebuilt = recompute(path, record, None)
    for name, data in rebuilt.files().items():
        target = path.parent / name.replace(rebuilt.stem, path.stem)
        if rebuilt.stem != path.stem and target.suffix in (".md", ".json"):  # its plots, by its own name
            data = data.decode("utf-8").replace(rebuilt.stem + "-", path.stem + "-").encode("utf-8")
        if not target.exists() or target.read_bytes() != data:
            target.write_bytes(data)
            print("wrote", target)
