"""The one canonical JSON and its digests, by known answers: an identity or a recording key that
drifted (other separators, ASCII escapes, unsorted keys, another line format) would orphan every
stored run and recording without a test noticing."""

from __future__ import annotations

import hashlib
import subprocess

from washexp.hashing import canonical_hash, canonical_json, sha256_bytes, tree_digest


def test_sha256_is_the_hex_digest():
    assert sha256_bytes(b"") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert sha256_bytes(b"abc") == hashlib.sha256(b"abc").hexdigest()


def test_canonical_json_sorts_keys_drops_spaces_and_keeps_unicode():
    value = {"b": [1, 2.5, None, True], "a": {"z": "é", "y": "x"}}
    assert canonical_json(value) == '{"a":{"y":"x","z":"é"},"b":[1,2.5,null,true]}'
    assert canonical_json({"b": 1, "a": 2}) == canonical_json({"a": 2, "b": 1})


def test_canonical_hash_is_sha256_of_the_utf8_text():
    assert canonical_hash({"k": "é"}) == hashlib.sha256('{"k":"é"}'.encode()).hexdigest()
    assert canonical_hash({"a": 1}) != canonical_hash({"a": 1.0})  # 1 and 1.0 are two values


def test_tree_digest_is_what_sha256sum_lists(tmp_path):
    files = {"b.txt": b"second\n", "a.txt": b"first\n"}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    digests = {name: sha256_bytes(data) for name, data in files.items()}
    listing = subprocess.run(["sha256sum", "a.txt", "b.txt"], cwd=tmp_path, capture_output=True, check=True).stdout
    assert tree_digest(digests) == hashlib.sha256(listing).hexdigest()
    assert tree_digest({}) == sha256_bytes(b"")
