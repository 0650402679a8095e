"""``washexp tasks``: generate a task set, or check a folder against a set's manifest.

    washexp tasks generate --n 200 --seed 7 --out DIR [--min-tokens 1000] [--max-tokens 8000]
                           [--units 12] [--facts 6] [--superseded 0.3] [--near 0.3] [--into-fixtures]
    washexp tasks verify MANIFEST FOLDER

Exit codes: 0 done (verify: the folder is the set); 2 bad input found before any work (a parameter
out of range, an output folder that exists or lies under fixtures/, a manifest that does not
match, a task that does not parse): one line naming it, nothing written.
"""

from __future__ import annotations

from pathlib import Path

from washexp.errors import USAGE, ConfigError, FixtureError, Parser, fail
from washexp.tasks import manifest
from washexp.tasks.generate import Params, generate


def _inside_fixtures(out: Path) -> bool:
    from washexp.errors import WashexpError
    from washexp.project import find_root

    try:
        fixtures = (find_root() / "fixtures").resolve()
    except WashexpError:
        return False
    return out.resolve().is_relative_to(fixtures)


def main(argv: list[str] | None = None) -> int:
    p = Parser(prog="washexp tasks", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate", help="write a deterministic set of compaction tasks and its manifest")
    d = Params()
    g.add_argument("--n", type=int, default=d.n, help=f"tasks (default {d.n})")
    g.add_argument("--seed", type=int, required=True, help="the set's seed: keep it secret to hide the set")
    g.add_argument("--out", type=Path, required=True, help="a new folder for the set")
    g.add_argument("--min-tokens", type=int, default=d.min_tokens, help="shortest trajectory (Qwen tokens)")
    g.add_argument("--max-tokens", type=int, default=d.max_tokens, help="longest trajectory (lengths are log-uniform)")
    g.add_argument("--units", type=int, default=d.units, help=f"tool results per task (default {d.units})")
    g.add_argument("--facts", type=int, default=d.facts, help=f"planted facts per task (default {d.facts})")
    g.add_argument("--superseded", type=float, default=d.superseded, help="chance a fact's value changes later")
    g.add_argument("--near", type=float, default=d.near, help="chance a fact has a near miss in a backup copy")
    g.add_argument("--into-fixtures", action="store_true", help="allow --out under the project's fixtures/")
    v = sub.add_parser("verify", help="is FOLDER the set MANIFEST lists? exit 0 yes, 2 naming the difference")
    v.add_argument("manifest", type=Path)
    v.add_argument("folder", type=Path)
    try:
        args = p.parse_args(argv)
        if args.command == "generate":
            if _inside_fixtures(args.out) and not args.into_fixtures:
                raise ConfigError(
                    f"--out {args.out}: under fixtures/ (generated sets go elsewhere unless --into-fixtures)"
                )
            params = Params(
                args.n, args.min_tokens, args.max_tokens, args.units, args.facts, args.superseded, args.near
            )
            made = generate(params, args.seed, args.out)
            print(f"{args.out}: {len(made['tasks'])} tasks, set sha256 {made['set']}")
            print(f"manifest {args.out / manifest.NAME} sha256 {manifest.digest(args.out / manifest.NAME)}")
        else:
            listed = manifest.read(args.manifest)
            manifest.check(listed, args.manifest, args.folder)
            print(f"{args.folder}: the set of {args.manifest} ({len(listed['tasks'])} tasks, set {listed['set']})")
    except (ConfigError, FixtureError) as err:
        return fail("washexp tasks", err, USAGE)
    return 0
