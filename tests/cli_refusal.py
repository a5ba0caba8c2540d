"""The one-line usage error a command-line entry point prints for bad arguments."""
from __future__ import annotations

from typing import Callable

import pytest


def refused(main: Callable[[list[str]], object], argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run ``main(argv)``; it must exit 2 without a traceback.  Returns the last stderr line."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and "Traceback" not in err, err
    return err.strip().splitlines()[-1]
