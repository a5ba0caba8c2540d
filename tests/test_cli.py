"""The command line as a whole: every command and every option explains itself."""
from __future__ import annotations

import argparse

import pytest

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
