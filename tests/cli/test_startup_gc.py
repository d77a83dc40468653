"""The console script's start-up without the cyclic collector (cli.main / cli.started): the
collector is back on before the command runs, and an in-process caller's collector state and
heap are left as they were."""

from __future__ import annotations

import ast
import gc
import subprocess
import sys

from bandwall.cli import main


def test_the_console_script_collects_again_once_the_command_is_loaded() -> None:
    code = (
        "import gc, sys\n"
        "from bandwall.cli import main, started\n"
        "import bandwall.cli as cli\n"
        "seen = []\n"
        "real = cli.started\n"
        "def spy():\n"
        "    real(); seen.append((gc.isenabled(), gc.get_freeze_count()))\n"
        "import bandwall.cli.root as root\n"
        "root.started = spy\n"
        "sys.argv = ['bandwall', 'catalog', 'gpus']\n"
        "main()\n"
        "print(seen, gc.isenabled())\n"
    )
    out = (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        .stdout.strip()
        .splitlines()[-1]
    )
    seen, enabled = out.rsplit(" ", 1)
    ((on, frozen),) = ast.literal_eval(seen)
    assert on and frozen > 10_000  # start-up's objects moved out of the collector's sight
    assert enabled == "True"


def test_an_in_process_caller_keeps_its_collector_state_and_heap() -> None:
    frozen = gc.get_freeze_count()
    gc.disable()
    try:
        assert main(["catalog", "gpus"]) == 0
        assert not gc.isenabled()  # the caller turned it off: not ours to turn on
    finally:
        gc.enable()
    assert main(["catalog", "gpus"]) == 0
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen  # nothing of the caller's frozen
