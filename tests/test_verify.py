"""``washexp export --bundle`` then ``washexp verify``: a record recomputed from its bundle agrees
(exit 0); one flipped artifact byte, one changed table value, a path leaving the bundle or a
symlink in it is named (exit 1); no record is a usage error (exit 2). Real sweep, real store."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests.conftest import copy_record, run_cli
from washexp.cli import main as washexp
from washexp.verify import main as verify


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    store = tmp_path_factory.mktemp("store")
    run_cli(["-m", "method=S", "topn=0,1", "task=[backup,refactor]"], store, env={"CI": "1"}, premade=True)
    out = store / "results"
    uri = f"sqlite:///{store / 'mlflow.db'}"
    assert washexp(["export", "--bundle", "--tracking-uri", uri, "--out", str(out)]) == 0
    (record,) = out.glob("*.json")
    assert record.with_suffix(".bundle").is_dir()
    return record


@pytest.fixture
def copy(exported: Path, tmp_path: Path) -> Path:
    return copy_record(exported, tmp_path)


def test_a_bundled_record_verifies(exported, capsys):
    assert verify([str(exported)]) == 0
    assert capsys.readouterr().out.startswith(f"verified {exported}")
    assert verify([str(exported.with_suffix(".md"))]) == 0


def test_one_flipped_artifact_byte_is_named(copy, capsys):
    table = sorted(copy.with_suffix(".bundle").glob("runs/*/retention.json"))[0]
    data = bytearray(table.read_bytes())
    data[10] ^= 1
    table.write_bytes(bytes(data))
    assert verify([str(copy)]) == 1
    err = capsys.readouterr().err
    run = table.parent.name
    assert re.search(rf"bundle artifact {run}/retention.json: sha256 [0-9a-f]{{64}} is not the manifest's", err), err


def test_one_changed_table_value_is_named(copy, capsys):
    record = json.loads(copy.read_text())
    key = next(
        k for k, t in record["tables"].items() if t["rows"] and isinstance(t["rows"][-1].get("retention"), float)
    )
    row = record["tables"][key]["rows"][-1]
    arm, was = row["arm"], row["retention"]
    row["retention"] = round(was + 0.1, 3)
    copy.write_text(json.dumps(record, indent=1))
    assert verify([str(copy)]) == 1
    out = capsys.readouterr().out
    assert f"tables {key} {arm!r} retention: record {row['retention']}, recomputed {was}" in out, out


def test_a_changed_markdown_cell_is_named(copy, capsys):
    md = copy.with_suffix(".md")
    text = md.read_text()
    first = re.search(r"\| (\d\.\d{3}) \|", text)
    md.write_text(text.replace(first.group(0), "| 9.999 |", 1))
    assert verify([str(copy)]) == 1
    assert "9.999" in capsys.readouterr().out


def test_a_run_id_leaving_the_bundle_is_refused(copy, capsys):
    runs = copy.with_suffix(".bundle") / "runs.json"
    doc = json.loads(runs.read_text())
    col = doc["columns"].index("run_id")
    doc["rows"][0][col] = "../../escape"
    runs.write_text(json.dumps(doc))
    assert verify([str(copy)]) == 1
    assert "run id '../../escape' is not a run id (a path?): refused" in capsys.readouterr().err


def test_a_symlinked_artifact_is_not_followed(copy, capsys, tmp_path):
    table = sorted(copy.with_suffix(".bundle").glob("runs/*/retention.json"))[0]
    outside = tmp_path / "outside.json"
    outside.write_bytes(table.read_bytes())  # the same bytes: only the link itself is wrong
    table.unlink()
    table.symlink_to(outside)
    assert verify([str(copy)]) == 1
    assert "a symlink (never followed): refused" in capsys.readouterr().err


def test_no_record_or_no_bundle_is_a_usage_error(copy, tmp_path, capsys):
    assert verify([str(tmp_path / "missing.json")]) == 2
    (tmp_path / "x.json").write_text("[1]")
    assert verify([str(tmp_path / "x.json")]) == 2
    shutil.rmtree(copy.with_suffix(".bundle"))
    assert verify([str(copy)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 3 and "no bundle there" in lines[-1], lines


def test_a_record_kept_under_another_name_verifies_and_its_plots_links_are_checked(copy, capsys):
    """A record renamed with its files (``...-baselines-...``, its plot links renamed with it) is
    recomputed under the name it has; a plot link left with the old name is a difference."""
    new = copy.stem.replace("compaction-", "compaction-renamed-", 1)
    for path in copy.parent.glob(copy.stem + "*"):
        path.rename(path.with_name(path.name.replace(copy.stem, new)))
    md, js = copy.with_name(new + ".md"), copy.with_name(new + ".json")
    text, doc = md.read_text(), js.read_text()
    assert copy.stem in text and copy.stem in doc  # the plots' links and file names
    md.write_text(text.replace(copy.stem, new))
    js.write_text(doc.replace(copy.stem, new))
    assert verify([str(js)]) == 0
    md.write_text(text.replace(copy.stem, new, 1))  # one link still names the old file
    assert verify([str(js)]) == 1
    assert "line" in capsys.readouterr().out
    md.write_text(text.replace(copy.stem, new))
    js.write_text(doc)  # the JSON's plots still name the old files
    assert verify([str(js)]) == 1
    assert f"plots '{copy.stem}-" in capsys.readouterr().out


def test_edited_plots_are_a_difference_and_a_path_is_refused(copy, capsys):
    """``plots`` was skipped: a caption claiming what the record does not show, or a file name
    leaving the record's folder, verified (exit 0)."""
    record = json.loads(copy.read_text())
    assert record["plots"], "the record has plots to edit"
    caption = record["plots"][0]["caption"]
    record["plots"][0]["caption"] = "retention rose to 1.000 for every arm"
    copy.write_text(json.dumps(record, indent=1))
    assert verify([str(copy)]) == 1
    assert "retention rose to 1.000 for every arm" in capsys.readouterr().out
    record["plots"][0]["caption"] = caption
    record["plots"][0]["file"] = "../../../etc/passwd"
    copy.write_text(json.dumps(record, indent=1))
    assert verify([str(copy)]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == f'washexp verify: {copy}: plot file "../../../etc/passwd" is not a plain name beside the record: refused\n'
    )


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda doc: doc.update(dtypes=[]), "dtypes is not an object"),
        (lambda doc: doc.update(columns=[c if c != "run_id" else "id" for c in doc["columns"]]), "with run_id"),
        (lambda doc: doc["rows"].append(doc["rows"][0]), "has two rows: one run, one row"),
        (lambda doc: doc.update(rows=[[]]), "rows is not a list of rows"),
    ],
)
def test_a_runs_table_that_is_no_runs_table_is_one_line(copy, capsys, edit, message):
    """``dtypes: []``, no ``run_id`` column, a repeated row: tracebacks (AttributeError, KeyError)."""
    runs = copy.with_suffix(".bundle") / "runs.json"
    doc = json.loads(runs.read_text())
    edit(doc)
    runs.write_text(json.dumps(doc))
    assert verify([str(copy)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("washexp verify: bundle runs.json: ") and message in err and err.count("\n") == 1, err


@pytest.mark.parametrize(
    "text",
    ["[" * 100_000 + "]" * 100_000, '{"schema": 1, "x": ' + "[" * 500 + "]" * 500 + "}", "9" * 1_000_000],
)
def test_a_record_nested_too_deep_or_with_a_huge_integer_is_one_line(copy, capsys, text):
    copy.write_text(text)
    assert verify([str(copy)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"washexp verify: {copy}: not usable JSON") and err.count("\n") == 1, err


def test_a_missing_store_is_refused_and_not_made(copy, tmp_path, capsys):
    """``--tracking-uri sqlite:///<missing file>`` made a 954 kB store and left it."""
    missing = tmp_path / "nothing" / "mlflow.db"
    missing.parent.mkdir()
    assert verify([str(copy), "--tracking-uri", f"sqlite:///{missing}"]) == 2
    assert capsys.readouterr().err == (
        f"washexp verify: --tracking-uri sqlite:///{missing}: no tracking store at {missing}\n"
    )
    assert list(missing.parent.iterdir()) == []


@pytest.fixture(scope="module")
def wash_exported(tmp_path_factory) -> Path:
    store = tmp_path_factory.mktemp("wash-store")
    run_cli(["-m", "benchmark=wash", "measurement=ceiling", "wash.measurement.arms=[off]"], store, premade=True)
    out = store / "results"
    uri = f"sqlite:///{store / 'mlflow.db'}"
    assert washexp(["export", "--bundle", "--experiment", "wash", "--tracking-uri", uri, "--out", str(out)]) == 0
    (record,) = out.glob("wash-*.json")
    return record


def test_a_wash_record_verifies_from_its_bundle_and_a_flipped_byte_is_named(wash_exported, tmp_path, capsys):
    """A wash record reads its runs' rows and JSON artifacts (rounds, muscle, final score): its
    bundle holds both, and a changed artifact is named."""
    assert verify([str(wash_exported)]) == 0
    for path in wash_exported.parent.glob(wash_exported.stem + "*"):
        (shutil.copytree if path.is_dir() else shutil.copy)(path, tmp_path / path.name)
    rounds = sorted((tmp_path / wash_exported.with_suffix(".bundle").name).glob("runs/*/rounds.json"))
    assert rounds, "the bundle holds the rounds the record read"
    data = bytearray(rounds[0].read_bytes())
    data[5] ^= 1
    rounds[0].write_bytes(bytes(data))
    capsys.readouterr()
    assert verify([str(tmp_path / wash_exported.name)]) == 1
    assert f"bundle artifact {rounds[0].parent.name}/rounds.json: sha256" in capsys.readouterr().err


def test_an_artifact_is_read_only_for_a_run_the_bundle_holds_and_a_file_its_manifest_lists(copy):
    from washexp.tracking import bundle

    uri = bundle.PREFIX + str(copy.with_suffix(".bundle"))
    doc = json.loads((copy.with_suffix(".bundle") / "runs.json").read_text())
    listed, run_id = (doc["columns"].index(c) for c in (bundle.TAG + "retention.json", "run_id"))
    held = next(row[run_id] for row in doc["rows"] if isinstance(row[listed], str))
    bundle.clear_cache()
    assert bundle.lists(uri, held, "retention.json") and not bundle.lists(uri, "0" * 32, "retention.json")
    assert json.loads(bundle.artifact(uri, held, "retention.json"))
    with pytest.raises(bundle.BundleMismatch, match="is not in the bundle's runs.json"):
        bundle.artifact(uri, "0" * 32, "retention.json")
    with pytest.raises(bundle.BundleMismatch, match="not in the run's manifest"):
        bundle.artifact(uri, held, "absent.json")
