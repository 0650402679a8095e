"""MkDocs hook: a page holding ``<!-- generated: NAME -->`` gets the text ``gen_reference`` makes
from the code for NAME there (the config keys, the commands' help, the error messages)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gen_reference import GENERATED  # noqa: E402  (the folder is put on the path first)

_MARK = re.compile(r"<!-- generated: (\w+) -->")


def on_page_markdown(markdown: str, page, config, files) -> str:
    return _MARK.sub(lambda m: GENERATED[m.group(1)](), markdown)
