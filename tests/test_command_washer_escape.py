"""A command washer sees its copy and nothing else (issue 37): each test is an escape attempt.

Every program runs for real. The first goes through ``washexp wash --tier full --washer command``
in a child process that holds a planted API key in its environment, as a user's shell would hand
it one, and tries to read that key from ``/proc`` (writing whatever it found into the store in
four encodings). The others run through ``CommandWasher.propose``: they list the processes they
can see, change the metadata of a file outside their copy and of the user's own store files by
absolute path, read the store's answer key, a raw disk or a file of the user. The host must come
out byte-for-byte and metadata-for-metadata as it was, and the key nowhere.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from pathlib import Path

import pytest

from tests.test_store_safety import run
from tests.test_wash_washers import copy_store
from washexp.errors import ConfigError
from washexp.wash.coalwash.files import read_md
from washexp.wash.washers import command
from washexp.wash.washers.command import STDOUT, CommandWasher, Containment, containment

SECRET = "sk-planted-escape-7f3a9c1e5b"
ENCODINGS = {
    "plain": SECRET,
    "reversed": SECRET[::-1],
    "base64": base64.b64encode(SECRET.encode()).decode(),
    "hex": SECRET.encode().hex(),
}
needs_containment = pytest.mark.skipif(
    not containment().complete(), reason=f"this machine has {', '.join(containment().missing())}"
)

READ_PROC = r"""
import base64, glob, os, sys
found = set()
for path in glob.glob('/proc/[0-9]*/environ') + glob.glob('/proc/[0-9]*/task/*/environ') + ['/proc/1/environ']:
    try:
        blob = open(path, 'rb').read()
    except OSError as err:
        print('denied', path, err.strerror, file=sys.stderr)
        continue
    for entry in blob.split(b'\0'):
        if b'_API_KEY=' in entry:
            found.add(entry.split(b'=', 1)[1].decode('latin-1'))
for path in glob.glob('/proc/[0-9]*/mem'):
    try:
        open(path, 'rb').read(1)
        print('opened', path)
    except OSError:
        pass
found |= {v for k, v in os.environ.items() if k.endswith('_API_KEY')}
print('found', sorted(found))
lines = []
for value in sorted(found):
    lines += [value, value[::-1], base64.b64encode(value.encode()).decode(), value.encode().hex()]
with open('versions.md', 'a') as fh:
    fh.write(''.join(f'- leaked {x}\n' for x in lines))
"""


def wash_with(store: Path, code: str, tmp_path: Path, *extra: str):
    command = json.dumps([sys.executable, "-c", code])
    args = ["wash", str(store), "--tier", "full", "--washer", "command", "--washer-arg", f"command={command}"]
    return run(
        [*args, "--operator", "approve-all", "--gauge", "off", *extra],
        cwd=tmp_path,
        env={"OPENAI_API_KEY": SECRET, "ANTHROPIC_API_KEY": SECRET},
    )


def everything_under(folder: Path) -> bytes:
    return b"\n".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink())


@needs_containment
def test_the_program_cannot_read_the_key_from_proc(tmp_path):
    """The trap: the program read ``/proc/<parent>/environ`` and wrote the API key into the store;
    reversed or base64 copies passed the masking untouched."""
    store = copy_store("superseded", tmp_path)
    done = wash_with(store, READ_PROC, tmp_path, "--json")
    assert done.returncode == 0, done.stderr
    blob = everything_under(store) + done.stdout.encode() + done.stderr.encode()
    assert {name for name, text in ENCODINGS.items() if text.encode() in blob} == set()


LIST_PROC = r"""
import glob
for path in sorted(glob.glob('/proc/[0-9]*/cmdline')):
    try:
        print(path.split('/')[2], open(path, 'rb').read().split(b'\0')[0].decode())
    except OSError as err:
        print(path.split('/')[2], 'unreadable', err.strerror)
"""


@needs_containment
def test_the_program_sees_only_its_own_processes(tmp_path):
    """The trap: every process of the machine was in the program's ``/proc``: washexp's memory
    (``/proc/<pid>/mem``), its open files and its environment were a path away."""
    files = read_md(copy_store("lean", tmp_path))
    washer = CommandWasher(command=[sys.executable, "-c", LIST_PROC], timeout_s=60)
    seen = washer.propose(files, (), tmp_path / "scratch").artifacts[STDOUT].splitlines()
    # itself (process 1 of its namespace) and nothing else: no pytest, no confine.py, no washexp (the
    # list is compared whole: a word search would also hit the venv's path when the clone is ./washexp)
    assert seen == [f"1 {sys.executable}"], seen


def stat_of(path: Path) -> tuple:
    st = os.lstat(path)
    xattrs = sorted((n, os.getxattr(path, n, follow_symlinks=False)) for n in os.listxattr(path, follow_symlinks=False))
    return (st.st_mode, st.st_uid, st.st_gid, st.st_nlink, st.st_mtime_ns, st.st_ctime_ns, xattrs, path.read_bytes())


METADATA = r"""
import os, sys
targets = sys.argv[1:]
for t in targets:
    for what, call in [
        ('chmod', lambda: os.chmod(t, 0o600)),
        ('chown', lambda: os.chown(t, 1234, 1234)),
        ('utime', lambda: os.utime(t, (0, 0))),
        ('setxattr', lambda: os.setxattr(t, 'user.washexp', b'owned')),
        ('fchmod', lambda: os.fchmod(os.open(t, os.O_RDONLY), 0o600)),
        ('link', lambda: os.link(t, 'linked-' + os.path.basename(t))),
        ('symlink-outside', lambda: os.symlink('/', t + '.lnk')),
        ('rename', lambda: os.rename(t, t + '.moved')),
        ('truncate', lambda: os.truncate(t, 0)),
    ]:
        try:
            call()
            print('DONE', what, t)
        except OSError as err:
            print('denied', what, t, err.strerror)
        for extra in ('linked-' + os.path.basename(t),):
            if os.path.lexists(extra):
                os.unlink(extra)
"""


@needs_containment
def test_the_program_cannot_change_metadata_outside_its_copy(tmp_path):
    """The trap: Landlock limits writes, not metadata; as root the program chmodded, chowned and
    touched the user's own store file by absolute path, exit 0."""
    store = copy_store("superseded", tmp_path)
    outside = tmp_path / "outside.txt"
    outside.write_text("the user's file\n")
    os.chmod(outside, 0o644)
    targets = [outside, store / "MEMORY.md", store / "versions.md", store / "expected.json"]
    before = {t: stat_of(t) for t in targets}
    code = METADATA.replace("targets = sys.argv[1:]", f"targets = {[str(t) for t in targets]!r}")
    washer = CommandWasher(command=[sys.executable, "-c", code], timeout_s=60)
    out = washer.propose(read_md(store), (), tmp_path / "scratch").artifacts[STDOUT]
    assert {t: stat_of(t) for t in targets} == before
    assert "DONE" not in out, out
    assert not any(p.name.endswith((".lnk", ".moved")) for p in tmp_path.rglob("*"))


READ_OUTSIDE = r"""
import os
for path in ARGS:
    try:
        with open(path, 'rb') as fh:
            print('READ', path, fh.read(64))
    except OSError as err:
        print('denied', path, err.strerror)
"""


@needs_containment
def test_the_program_cannot_read_the_answer_key_a_raw_disk_or_home(tmp_path):
    """The trap: the copy leaves out ``expected.json``, yet the program could read it (and the
    user's other files, or the raw disk under them) by absolute path."""
    store = copy_store("superseded", tmp_path)
    raw = [f"/dev/{d}" for d in os.listdir("/dev") if d.startswith(("vd", "sd", "nvme", "xvd"))]
    paths = [str(store / "expected.json"), str(store / "MEMORY.md"), str(tmp_path / "secret.txt"), *raw]
    (tmp_path / "secret.txt").write_text("SECRET-PLANS-0xC0FFEE\n")
    code = READ_OUTSIDE.replace("ARGS", repr(paths))
    washer = CommandWasher(command=[sys.executable, "-c", code], timeout_s=60)
    out = washer.propose(read_md(store), (), tmp_path / "scratch").artifacts[STDOUT]
    assert [line.split()[1] for line in out.splitlines() if line.startswith("denied ")] == paths, out


@needs_containment
def test_root_runs_it_without_a_capability_and_under_the_filter(tmp_path):
    """The trap: as root the program had every capability (``CAP_CHOWN``, ``CAP_SYS_PTRACE``,
    ``CAP_SYS_ADMIN`` to remount ``/proc``) and no filter."""
    files = read_md(copy_store("lean", tmp_path))
    washer = CommandWasher(command=["grep", "-E", "^(Cap|NoNewPrivs|Seccomp:)", "/proc/self/status"], timeout_s=60)
    seen = dict(
        line.split(":\t") for line in washer.propose(files, (), tmp_path / "scratch").artifacts[STDOUT].splitlines()
    )
    assert {k: int(v, 16) for k, v in seen.items() if k.startswith("Cap")} == dict.fromkeys(
        ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"), 0
    )
    assert seen["NoNewPrivs"] == "1" and seen["Seccomp"] == "2"


def test_a_machine_that_cannot_contain_it_refuses_in_one_line(monkeypatch):
    """Where the kernel offers less, the washer is not built unless the user opts out, and then
    its ``confinement`` (a run param) says UNCONTAINED and what was missing."""
    monkeypatch.setattr(command, "containment", lambda: Containment({"seccomp": True, "nocaps": True}))
    with pytest.raises(ConfigError) as info:
        CommandWasher(command=["true"])
    assert str(info.value) == (
        "washer command: this machine cannot contain the program (no PID and mount namespaces, no Landlock); "
        "washer.uncontained=true runs it anyway, and the run records that"
    )
    washer = CommandWasher(command=["true"], uncontained=True)
    assert washer.confinement == "subreaper+seccomp+no-caps UNCONTAINED (no PID and mount namespaces, no Landlock)"
    assert washer.mechanisms == ("seccomp", "nocaps")


PROBE = """#!/bin/sh
# a washer kept inside a project: it tries what lies beside it
for path in "$@"; do
    if cat "$path" > /dev/null 2>&1; then echo "READ $path"; else echo "denied $path"; fi
done
if ls "$(dirname "$0")" > /dev/null 2>&1; then echo "LISTED its folder"; else echo "denied its folder"; fi
"""


@needs_containment
def test_a_program_kept_in_a_project_cannot_read_the_answer_key_beside_it(tmp_path):
    """The trap (issue 48): Landlock granted "the folder of its own program", so a probe script
    kept in the project read ``fixtures/wash/<store>/expected.json`` and ``mlruns/mlflow.db``
    beside it. It may read the file it is and the interpreter its ``#!`` names, not their folder."""
    project = tmp_path / "project"
    store = copy_store("superseded", project / "fixtures" / "wash")
    (project / "mlruns").mkdir()
    (project / "mlruns" / "mlflow.db").write_bytes(b"SQLite format 3\0 fake tracking store")
    probe = project / "probe.sh"
    probe.write_text(PROBE)
    probe.chmod(0o755)
    secrets = [store / "expected.json", store / "MEMORY.md", project / "mlruns" / "mlflow.db"]
    washer = CommandWasher(command=[str(probe), *map(str, secrets)], timeout_s=60)
    out = washer.propose(read_md(store), (), tmp_path / "scratch").artifacts[STDOUT]
    assert out.splitlines() == [*(f"denied {p}" for p in secrets), "denied its folder"], out


def test_what_a_script_executes_is_its_file_and_its_interpreter(tmp_path):
    """Files, never folders: ``#!/usr/bin/env NAME`` is NAME found on the program's PATH."""
    (tmp_path / "bin").mkdir()
    tool = tmp_path / "bin" / "tool"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    script = tmp_path / "wash.tool"
    script.write_text("#!/usr/bin/env tool -x\necho hi\n")
    assert command.executed_files(str(script), str(tmp_path / "bin")) == [
        str(script.resolve()),
        os.path.realpath("/usr/bin/env"),
        str(tool.resolve()),
    ]
    binary = os.path.realpath(sys.executable)
    assert command.executed_files(binary, None) == [binary]
