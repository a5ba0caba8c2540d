"""Command-line tools; each module is one ``kreplica`` subcommand (see ``kreplica/cli.py``)."""
