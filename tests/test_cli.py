"""The command line as a whole: every command and every option explains itself."""
from __future__ import annotations

import argparse

import pytest

from cli_refusal import refused
from kreplica import cli
from kreplica.tools import bench


def _options(parser: argparse.ArgumentParser, path: str):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{path} {name}", None, sub
                yield from _options(sub, f"{path} {name}")
        elif not isinstance(action, argparse._HelpAction):
            yield path, action, None


@pytest.mark.parametrize("commands, prog", [(cli.SUBCOMMANDS, "kreplica"), (bench.BENCHES, "kreplica bench")])
def test_every_command_and_option_has_help(commands, prog):
    parser = cli.build_parser(commands, prog, [])
    missing = []
    for path, action, sub in _options(parser, prog):
        if sub is not None and not (sub.description or "").strip():
            missing.append(path)
        if action is not None and not action.help:
            missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
    assert not missing, f"no help text: {missing}"


def test_help_runs_for_every_command(capsys):
    for name in cli.SUBCOMMANDS:
        with pytest.raises(SystemExit) as e:
            cli.main([name, "--help"])
        assert e.value.code == 0 and "usage: kreplica " + name in capsys.readouterr().out


def test_readme_command_table_lists_every_command():
    from pathlib import Path

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    table = [line for line in readme.splitlines() if line.startswith("| `kreplica ")]
    missing = [name for name in cli.SUBCOMMANDS if not any(line.startswith(f"| `kreplica {name}") for line in table)]
    assert not missing, f"README's command table omits {missing}"


def _refused(argv, capsys) -> str:
    """The one-line usage error argparse prints (exit status 2) for ``argv``."""
    return refused(cli.main, argv, capsys)


def test_shared_argument_types(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    assert cli.at_least(1)("3") == 3 and cli.directory(str(tmp_path)) == str(tmp_path)
    for convert, text, message in [(cli.at_least(1), "0", "0: must be at least 1"),
                                   (cli.at_least(0), "x", "'x' is not an integer"),
                                   (cli.directory, str(tmp_path / "nope"), "no such directory"),
                                   (cli.directory, str(tmp_path / "file"), "not a directory"),
                                   (cli.output_file, str(tmp_path / "nope" / "x.json"), "No such file or directory"),
                                   (cli.output_file, str(tmp_path), "Is a directory")]:
        with pytest.raises(argparse.ArgumentTypeError, match=message):
            convert(text)
    assert cli.output_file(str(tmp_path / "new.json")) and not (tmp_path / "new.json").exists()  # tried, not left


@pytest.mark.parametrize("argv, message", [
    (["--partitions", "0"], "argument --partitions: 0: must be at least 1"),
    (["--partitions", "-3"], "argument --partitions: -3: must be at least 1"),
    (["--repeat", "0"], "argument --repeat: 0: must be at least 1"),
    (["--repeat", "-1"], "argument --repeat: -1: must be at least 1"),
])
def test_bench_failover_refuses_bad_sizes_before_running(argv, message, capsys):
    assert message in _refused(["bench", "failover", "--no-zookeeper", *argv], capsys)


def test_bench_failover_shows_no_ratio_to_zero_reelected_partitions(capsys):
    assert cli.main(["bench", "failover", "--no-zookeeper", "--partitions", "1", "--repeat", "1"]) == 0
    rows = {tuple(line.split()[:2]): line.split() for line in capsys.readouterr().out.splitlines()
            if line.startswith("memory ")}
    broker, controller = rows["memory", "broker"], rows["memory", "controller"]
    assert broker[3] == "0" and broker[-2] == "-"  # 1002 led nothing: no trips per re-elected partition
    assert controller[3] == "1" and float(controller[-2]) == float(controller[7])  # trips / 1


# `kreplica sweep`: a bad grid is refused before Spark starts (it must never start here).

@pytest.fixture
def no_spark(monkeypatch):
    def local_session(*args, **kwargs):
        raise AssertionError("Spark was started for a grid that should have been refused")

    monkeypatch.setattr("kreplica.spark.session.local_session", local_session)


@pytest.mark.parametrize("flags, message", [
    (["--acks", "2"], "acks='2': expected 0, 1 or all"),
    (["--min-isr", "0"], "min.insync.replicas=0"),
    (["--rf", "0"], "replication factor 0"),
    (["--truncation", "foo"], "replica.truncation.strategy='foo'"),
    (["--until", "-5"], "until_ms and liveness_ms must be >= 0"),
    (["--until", "x"], "sweep axis until_ms='x'"),
])
def test_sweep_refuses_a_bad_axis_value_up_front(flags, message, no_spark, tmp_path, capsys):
    argv = ["sweep", "--scenario", "random-chaos", *flags, "--out", str(tmp_path / "out")]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("sweep: ") and message in err and len(err.strip().splitlines()) == 1, err


def test_sweep_refuses_a_bad_grid_file_up_front(no_spark, tmp_path, capsys):
    grid = tmp_path / "grid.toml"
    grid.write_text('scenarios = ["random-chaos"]\nseeds = "1..2"\n[config]\nacks = ["7"]\n')
    assert cli.main(["sweep", "--grid", str(grid), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.startswith("sweep: INVALID_CONFIG: acks='7'")


def test_sweep_refuses_bad_run_options(capsys):
    assert "--runs-per-task: 0: must be at least 1" in _refused(
        ["sweep", "--scenario", "random-chaos", "--out", "x", "--runs-per-task", "0"], capsys)
