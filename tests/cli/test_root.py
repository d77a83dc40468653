"""The lazy root group: `bandwall --help` imports no command, its summaries are the commands'
own, and shell completion offers the values of every choice option (issue 24 items 4, 10)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bandwall.cli.options import _completer, field_choices
from bandwall.cli.root import COMMANDS, load_command
from bandwall.model.vocab import Recompute
from bandwall.planning.request import PlanRequest, field_flag

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": SRC, **env},
    )


@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_root_summary_is_the_commands_own(name: str) -> None:
    assert load_command(name).get_short_help_str(limit=1000) == COMMANDS[name][2]


def test_root_help_imports_no_command_module() -> None:
    r = _python(
        "import json, sys\nfrom bandwall.cli import main\nrc = main(['--help'])\n"
        "print(json.dumps([rc, sorted(m for m in sys.modules if m.startswith('bandwall.'))]))"
    )
    rc, loaded = json.loads(r.stdout.strip().splitlines()[-1])
    assert rc == 0 and "plan" in r.stdout
    assert [m for m in loaded if m.startswith("bandwall.cli.")] == ["bandwall.cli.root"]
    assert not {"bandwall.planning.request", "bandwall.model.engine"} & set(loaded)


def _complete(words: str) -> list[str]:
    cword = str(len(words.split()) - (0 if words.endswith(" ") else 1))
    r = _python(
        "import sys\nfrom bandwall.cli import main\nsys.exit(main())",
        _BANDWALL_COMPLETE="complete_bash",
        COMP_WORDS=words,
        COMP_CWORD=cword,
    )
    return r.stdout.split()


def test_completion_offers_catalog_keys_and_commands() -> None:
    assert "plan" in _complete("bandwall pl")
    assert _complete("bandwall plan --preset ai-factory-i") == ["ai-factory-ib"]
    assert "H100-SXM" in _complete("bandwall sweep --gpu ")
    assert set(_complete("bandwall plan --recompute ")) == {r.value for r in Recompute}
    assert _complete("bandwall plan --recompute save_q") == ["save_qkv_proj"]


def test_every_choice_option_completes_to_its_choices() -> None:
    choice_fields = [n for n in PlanRequest.model_fields if field_choices(n)]
    assert {"model", "preset", "gpu", "fabric", "recompute"} <= set(choice_fields)
    for name in choice_fields:
        values = field_choices(name)
        assert _completer(name)("") == values, field_flag(name)
        assert _completer(name)(values[0][:2]) == [v for v in values if v.startswith(values[0][:2])]
