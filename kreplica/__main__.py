"""``python -m kreplica``: the same as the ``kreplica`` command."""
from .cli import main

raise SystemExit(main())
