"""``kreplica log-demo``: the native log in a few seconds.

1. Append ``--records`` 100 B records in batches of 1,000 with a progress bar and the rate.
2. Start a writer process, let it append (flushing every 50,000 records), SIGKILL it
   mid-append.
3. Reopen the log: recovery re-validates every batch after the recovery point,
   cuts a torn tail, rebuilds the indexes; check the result is a gap-free prefix
   holding everything that was flushed.
4. Dump a few batches as ``kreplica dump-log`` does.

The log goes in a temporary directory, deleted at the end; with ``--dir DIR`` it goes
in a new directory under DIR and is kept there, for ``kreplica dump-log``.
"""
from __future__ import annotations

import argparse
import io
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..cli import at_least, directory

HELP = "show the log: append, SIGKILL a writer, recover, dump"
CONFIG = {"segment.bytes": 64 << 20, "flush.messages": 50_000}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", type=at_least(1), default=2_000_000,
                        help="records to append in step 1 (default 2,000,000)")
    parser.add_argument("--dir", type=directory, default=None,
                        help="keep the demo log in a new directory under DIR (default: a temporary "
                             "directory, deleted at the end)")
    parser.add_argument("--writer", default=None, help=argparse.SUPPRESS)


def _value(i: int) -> bytes:
    return b"%010d" % i + b"-" * 90


def _writer(path: str) -> None:
    """The process that gets killed: appends forever, reporting acknowledged and flushed."""
    from ..log import Log

    log = Log.open(path, CONFIG)
    i = log.log_end_offset
    while True:
        info = log.append_as_leader([_value(j) for j in range(i, i + 1000)])
        i = info.last_offset + 1
        print(info.last_offset, log.recovery_point, flush=True)


def execute(args: argparse.Namespace) -> int:
    if args.writer:
        _writer(args.writer)
        return 0
    from rich.console import Console

    console = Console()
    try:
        tmp = tempfile.mkdtemp(prefix="kreplica-log-demo-", dir=args.dir)
    except OSError as e:  # e.g. a --dir this user cannot write in
        print(f"Error: --dir {args.dir}: {e}", file=sys.stderr)
        return 1
    path = Path(tmp) / "demo-0"
    try:
        ok = _append(console, path, args.records)
        ok &= _kill_and_recover(console, path)
    finally:
        if not args.dir:
            shutil.rmtree(tmp, ignore_errors=True)
    if args.dir:
        console.print(f"the log is kept in {path} (kreplica dump-log {path})", highlight=False, soft_wrap=True)
    return 0 if ok else 1


def _append(console, path: Path, records: int) -> bool:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from ..log import Log

    console.rule("[bold]1. append 100 B records, 1,000 per batch, through append_as_leader")
    values = [_value(i) for i in range(1000)]
    log = Log.open(path, CONFIG)
    columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed:,} records"),
               TimeElapsedColumn())
    start = time.perf_counter()
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("appending", total=records)
        for b, done in enumerate(range(0, records, 1000)):
            n = min(1000, records - done)
            log.append_as_leader(values if n == 1000 else values[:n])  # the last batch may be short
            if b % 50 == 49 or done + n == records:
                progress.update(task, completed=done + n)
    elapsed = time.perf_counter() - start
    console.print(f"appended {records:,} records ({log.size_in_bytes() / 1e6:,.0f} MB) in "
                  f"{elapsed:.2f} s: [bold]{records / elapsed / 1e6:.2f} M records/s[/], "
                  f"{log.size_in_bytes() / elapsed / 1e9:.2f} GB/s, {len(log.segments)} segments")
    log.close()
    for p in sorted(path.iterdir()):  # the writer starts on a fresh log
        p.unlink()
    return True


def _kill_and_recover(console, path: Path) -> bool:
    from ..log import Log
    from ..records import decode_records
    from .dump_log import dump

    console.rule("[bold]2. SIGKILL a writer process mid-append")
    proc = subprocess.Popen([sys.executable, "-m", "kreplica", "log-demo", "--writer", str(path)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    acked = flushed = -1
    seen = 0
    while flushed < 150_000 or seen < 175:  # kill between two flushes, mid-append
        seen += 1
        line = proc.stdout.readline()
        if not line:
            console.print("[red]the writer died on its own[/]")
            return False
        acked, flushed = (int(x) for x in line.split())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    console.print(f"writer killed after acknowledging offset {acked:,}; recovery point (flushed) {flushed:,}")

    console.rule("[bold]3. reopen: recovery")
    start = time.perf_counter()
    log = Log.open(path, CONFIG)
    took = time.perf_counter() - start
    for r in log.last_recovery:
        console.print(f"  segment re-validated: {r.batches:,} batches, {r.valid_bytes:,} valid bytes"
                      + (f", cut at: {r.error}" if r.error else ""))
    leo = log.log_end_offset
    offset, count, in_order = 0, 0, True
    while offset < leo:
        recs = decode_records(log.read(offset, 4 << 20).view)
        in_order &= recs[0].offset == offset and recs[-1].value == _value(recs[-1].offset)
        count += len(recs)
        offset = recs[-1].offset + 1
    ok = in_order and count == leo and leo >= flushed
    verdict = "[green]a gap-free prefix holding everything flushed[/]" if ok else "[red]NOT a clean prefix[/]"
    console.print(f"recovered in {took * 1000:.0f} ms: log end offset {leo:,} (acknowledged up to {acked:,}, "
                  f"flushed {flushed:,}); {count:,} records read back: {verdict}")
    log.close()

    console.rule("[bold]4. kreplica dump-log (first two batches, then the last, with --print-data for 3 records)")
    text = io.StringIO()
    dump([path], False, text)
    lines = text.getvalue().splitlines()
    for line in lines[:4] + ["..."] + lines[-1:]:
        console.print(line, highlight=False, markup=False)
    data = io.StringIO()
    dump([p for p in sorted(path.glob("*.log"))][:1], True, data)
    for line in [ln for ln in data.getvalue().splitlines() if ln.startswith("|")][:3]:
        console.print(line[:160], highlight=False, markup=False)
    return ok
