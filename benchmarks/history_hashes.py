"""Record the simulator's history hashes, or check a change against a recording.

A speed-up of the engine or the simulator must not change what happens: the same
seed must give the same history, byte for byte.  This runs every shipped scenario
under both truncation strategies for a few seeds, plus swarm seeds over
random-chaos (the swarm's own mix) and over gc-pause-chaos (its own mix, scaled),
and writes (or compares) one line per run: name, seed, hash.

    .venv/bin/python benchmarks/history_hashes.py --record /tmp/hashes.txt   # before
    .venv/bin/python benchmarks/history_hashes.py --check /tmp/hashes.txt    # after

``--check`` exits 1 and names every run whose history differs; a recording it cannot
read (or, for ``--record``, write) is refused before the runs start.  A change that
alters histories on purpose (a new event, a fixed bug) is recorded anew and says
so in its commit.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

# The checkout this file is in, not whichever one the venv's editable install names: a
# check run in a second worktree must judge that worktree's code.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kreplica.sim import scenarios  # noqa: E402
from kreplica.sim.swarm import swarm_scenario  # noqa: E402
from kreplica.sim.world import World  # noqa: E402

STRATEGIES = ("high-watermark", "leader-epoch")


def runs(seeds: int, swarm_seeds: int) -> list[tuple[str, int, object]]:
    """(label, seed, scenario) for every run the recording covers."""
    out = []
    for name in scenarios.names():
        base = scenarios.load(name)
        for strategy in STRATEGIES:
            sc = replace(base, config={**base.config, "replica.truncation.strategy": strategy})
            out += [(f"{name}/{strategy}", seed, sc) for seed in range(1, seeds + 1)]
    chaos = scenarios.load("random-chaos")
    out += [("swarm/random-chaos", seed, swarm_scenario(seed, chaos)) for seed in range(1, swarm_seeds + 1)]
    pauses = scenarios.load("gc-pause-chaos")
    out += [("swarm/gc-pause-chaos", seed, swarm_scenario(seed, pauses)) for seed in range(1, seeds + 1)]
    return out


def hashes(seeds: int, swarm_seeds: int) -> list[str]:
    lines = []
    for label, seed, sc in runs(seeds, swarm_seeds):
        r = World(sc, seed, keep_history=False).run()
        lines.append(f"{label} {seed} {r.history_hash}")
        print(lines[-1], flush=True)
    return lines


def _positive(text: str) -> int:
    if not (text.isascii() and text.isdigit() and int(text) > 0):
        raise argparse.ArgumentTypeError(f"expected a positive whole number, not {text!r}")
    return int(text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--record", metavar="FILE", help="write the hashes here")
    what.add_argument("--check", metavar="FILE", help="compare with a recording; exit 1 on any difference")
    ap.add_argument("--seeds", type=_positive, default=3,
                    help="seeds per scenario and strategy, and of the gc-pause-chaos swarm (default 3)")
    ap.add_argument("--swarm-seeds", type=_positive, default=12, help="swarm seeds over random-chaos (default 12)")
    args = ap.parse_args(argv)
    # The runs take minutes: a recording that cannot be read, or written, is refused first.
    want: list[str] = []
    if args.check:
        try:
            with open(args.check) as f:
                want = [line for line in f.read().split("\n") if line]
        except OSError as e:
            ap.error(f"argument --check: {args.check}: {e.strerror or e}")
    elif Path(args.record).is_dir() or not Path(args.record).parent.is_dir():
        ap.error(f"argument --record: {args.record}: not a file in an existing directory")
    got = hashes(args.seeds, args.swarm_seeds)
    if args.record:
        with open(args.record, "w") as f:
            f.write("\n".join(got) + "\n")
        print(f"{len(got)} runs recorded in {args.record}")
        return 0
    if len(want) != len(got):
        print(f"the recording has {len(want)} runs, this checkout {len(got)}")
        return 1
    differ = [w for w, g in zip(want, got) if w != g]
    for w in differ:
        print(f"DIFFERENT: {w}")
    print(f"{len(got) - len(differ)} of {len(got)} histories identical")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
