"""The command washer, contained (issue 23): each test is a hostile or careless program.

Every program runs for real, as ``washer.command``, on a private copy of a real store: a link
that would read a file from outside the store back in, a program that prints its environment, a
detached child in a new session, output without end, a write outside its copy. The trap each
guards is named in its docstring.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import sys
import time
from pathlib import Path

import pytest

from tests.test_wash_washers import copy_store, tree_digest
from washexp import masking
from washexp.wash import pipeline
from washexp.wash.coalwash import gauge
from washexp.wash.coalwash.files import read_md
from washexp.wash.coalwash.operators import make_operator
from washexp.wash.measure import rounds
from washexp.wash.washers import WasherError, command
from washexp.wash.washers.command import LIMIT, STDERR, STDOUT, CommandWasher, Containment, containment
from washexp.wash.washers.confine import landlock_abi

OUTSIDE = "a file outside the store: SECRET-PLANS-0xC0FFEE\n"


def sh(script: str, timeout_s: float = 60, **kw) -> CommandWasher:
    return CommandWasher(command=["sh", "-c", script], timeout_s=timeout_s, **kw)


@pytest.mark.parametrize(
    ("make", "what"),
    [
        ("rm versions.md && ln -s {outside} versions.md", "versions.md is a symbolic link"),
        ("rm versions.md && ln MEMORY.md versions.md", "MEMORY.md is a hard link"),  # Landlock denies one from outside
        ("rm versions.md && mkfifo versions.md", "versions.md is a special file"),
        ("mkdir sub && ln -s {outside} sub/x.md", "sub/x.md is a symbolic link"),
    ],
    ids=["symlink", "hardlink", "fifo", "nested-symlink"],
)
def test_a_link_or_special_file_in_the_copy_fails_the_round(make, what, tmp_path, monkeypatch):
    """The trap: ``rm versions.md && ln -s /outside versions.md`` with ``--operator approve-all``
    applied the outside file's text into the store. The seccomp filter denies every link and
    special file now (``test_seccomp_denies_links_and_special_files``); the check of the copy is the
    line behind it, tested here where the filter is missing and the user opted out."""
    monkeypatch.setattr(command, "containment", lambda: Containment({**containment().found, "seccomp": False}))
    store = copy_store("superseded", tmp_path)
    before = read_md(store)  # the store's notes (its state files are another test's business)
    outside = tmp_path / "outside.txt"
    outside.write_text(OUTSIDE)
    washer = sh(make.format(outside=outside) + "; echo linked", uncontained=True)
    assert "UNCONTAINED (no seccomp filter)" in washer.confinement
    operator = make_operator("approve-all", ())
    with pytest.raises(WasherError) as info:
        pipeline.wash(store, washer, gauge.load_gauge("off"), operator, tier="full")
    assert what in str(info.value) and "\n" not in str(info.value)
    assert info.value.artifacts[STDOUT] == "linked\n"  # the program's output is kept with the failure
    assert read_md(store) == before
    assert all("SECRET-PLANS" not in text for text in read_md(store).values())


@pytest.mark.skipif(not containment().found.get("seccomp"), reason="this kernel has no seccomp filter")
def test_seccomp_denies_links_and_special_files(tmp_path):
    """The same programs with the filter in force: the link is never made (``EPERM``)."""
    files = read_md(copy_store("superseded", tmp_path))
    outside = tmp_path / "outside.txt"
    outside.write_text(OUTSIDE)
    script = f"ln -s {outside} a.md; ln MEMORY.md b.md; mkfifo c.md; ls"
    proposal = sh(script).propose(files, (), tmp_path / "scratch")
    assert proposal.artifacts[STDERR].count("Operation not permitted") == 3, proposal.artifacts[STDERR]
    assert proposal.artifacts[STDOUT].split() == sorted(files)


def test_a_failed_round_keeps_the_programs_output_in_the_run(tmp_path):
    """The trap: ``WasherError.artifacts`` (a failed command's stdout and stderr) was dropped by the
    rounds loop, so a failed round said "exited with status 3" and nothing else."""
    store = copy_store("superseded", tmp_path)
    files = read_md(store)
    expected = json.loads((Path(__file__).parent.parent / "fixtures/wash/superseded/expected.json").read_text())
    washer = sh("echo 'half way'; echo 'quota exceeded' >&2; exit 3")
    operator = make_operator("approve-all", ())

    def wash(d: Path, _round: int):
        return pipeline.wash(d, washer, gauge.load_gauge("off"), operator, tier="full")

    (rd,) = rounds.loop(store, files, expected, "superseded", wash, 3, 0)
    assert rd.failed == "washer command: sh exited with status 3: quota exceeded"
    kept = rounds.artifacts([rd])
    assert kept["rounds/r01/command.stdout.txt"] == "half way\n"
    assert kept["rounds/r01/command.stderr.txt"] == "quota exceeded\n"


PRINT_ENV = f"{shlex.quote(sys.executable)} -c 'import json, os; print(json.dumps(dict(os.environ)))'"


def test_the_program_gets_no_credentials_unless_named(tmp_path, monkeypatch):
    """The trap: the program inherited ``OPENAI_API_KEY`` and printed it into its stdout artifact."""
    secrets = {
        "OPENAI_API_KEY": "sk-planted-openai-0123456789",
        "GITHUB_TOKEN": "ghp_planted_0123456789",
        "AWS_SECRET_ACCESS_KEY": "planted-aws-0123456789",
        "client_secret_file": "planted-lowercase-0123456789",
        "DASHSCOPE_KEY": "planted-configured-0123456789",  # no pattern: the configured api_key_env
        "HF_TOKEN": "hf_planted_allowed_0123456789",  # named in washer.env: passed on
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("WASHEXP_PLAIN_SETTING", "not passed")
    monkeypatch.setenv("WASHEXP_NAMED_SETTING", "passed")
    monkeypatch.setenv("LC_TIME", "C")
    monkeypatch.setattr(masking, "_declared", {"DASHSCOPE_KEY"})
    files = read_md(copy_store("lean", tmp_path))
    proposal = sh(PRINT_ENV, env=["HF_TOKEN", "WASHEXP_NAMED_SETTING"]).propose(files, (), tmp_path / "scratch")
    seen = json.loads(proposal.artifacts[STDOUT])
    assert {n for n in secrets if n in seen} == {"HF_TOKEN"}
    assert "WASHEXP_PLAIN_SETTING" not in seen and seen["WASHEXP_NAMED_SETTING"] == "passed"  # built, not inherited
    assert seen["PATH"] == os.environ["PATH"] and seen["LC_TIME"] == "C"
    assert Path(seen["WASHEXP_STORE"]).name.startswith("store-") and Path(seen["TMPDIR"]).is_dir()


def _gone(marker: bytes, within_s: float = 60.0) -> bool:
    """No process of this machine has ``marker`` in its command line (a pid from inside the
    program's PID namespace means nothing out here)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        alive = []
        for path in Path("/proc").glob("[0-9]*/cmdline"):
            with contextlib.suppress(OSError):  # a process that just ended
                alive += [path] if marker in path.read_bytes() else []
        if not alive:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize(
    ("tail", "timeout_s"),
    [("exit 0", 600), ("sleep 3600", 2), ("exec sleep 3600", 2), ("exec >&- 2>&-; sleep 3600", 2)],
    ids=["program-ends", "timeout", "timeout-exec", "timeout-pipes-closed"],
)
def test_a_detached_child_in_a_new_session_is_killed(tail, timeout_s, tmp_path):
    """The trap: ``setsid sleep 25 &`` outlived washexp (its group was killed, a new session is
    another group). It must be gone when the round ends, whether the program ended or timed out."""
    files = read_md(copy_store("lean", tmp_path))
    marker = f"25.{os.getpid()}{time.monotonic_ns() % 10**9}"  # sleep 25.NNN: this test's own
    script = f"setsid sleep {marker} >/dev/null 2>&1 </dev/null & echo $! > pid.txt; {tail}"
    started = time.monotonic()
    try:
        sh(script, timeout_s=timeout_s).propose(files, (), tmp_path / "scratch")
    except WasherError as err:
        assert "timed out" in str(err)
    # not killed, the round would last an hour: a bound no busy machine comes near, not a timing
    assert time.monotonic() - started < 600
    (copy,) = (tmp_path / "scratch").glob("store-*")
    assert int((copy / "pid.txt").read_text()) > 0  # it was started
    assert _gone(f"sleep\0{marker}\0".encode()), f"the detached child (sleep {marker}) outlived its round"


def test_output_is_capped_and_counted(tmp_path):
    """The trap: 100 MB of stdout took 323 MB of RAM, kept whole per round."""
    files = read_md(copy_store("lean", tmp_path))
    write = 'import sys; sys.stdout.write("o" * (5 << 20)); sys.stderr.write("e" * (3 << 20))'
    big = f"{shlex.quote(sys.executable)} -c {shlex.quote(write)}"
    proposal = sh(big).propose(files, (), tmp_path / "scratch")
    out, err = proposal.artifacts[STDOUT], proposal.artifacts[STDERR]
    assert (
        out.startswith("o" * LIMIT)
        and out[LIMIT:].strip() == f"[washexp: {(5 << 20) - LIMIT} more bytes not kept (the first {LIMIT} are above)]"
    )
    assert err.startswith("e" * LIMIT) and f"{(3 << 20) - LIMIT} more bytes not kept" in err
    assert len(out) < LIMIT + 200 and len(err) < LIMIT + 200


@pytest.mark.skipif(not containment().complete(), reason=f"this machine has {', '.join(containment().missing())}")
def test_landlock_denies_writes_outside_the_copy(tmp_path):
    """The trap: the program could write anywhere (the real store, the user's files)."""
    store = copy_store("lean", tmp_path)
    before = tree_digest(store)
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched\n")
    washer = sh(
        f"echo hacked > {victim}; echo x > {tmp_path}/new.txt; echo y > {store}/conventions.md; ln {victim} v.md;"
        " echo ok > inside.txt && echo tmp > $TMPDIR/t && echo done"
    )
    assert washer.confinement == f"subreaper+pid-mount-ns+landlock-abi{landlock_abi()}+seccomp+no-caps"
    proposal = washer.propose(read_md(store), (), tmp_path / "scratch")
    assert proposal.artifacts[STDOUT] == "done\n"  # inside its copy and its temp folder it may write
    assert proposal.artifacts[STDERR].count("Permission denied") == 3  # and ln's own message:
    assert "ln: failed to create hard link" in proposal.artifacts[STDERR]
    assert victim.read_text() == "untouched\n" and not (tmp_path / "new.txt").exists()
    assert tree_digest(store) == before
