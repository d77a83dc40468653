"""Readers for other tools' benchmark output (nccl-tests logs), into the results store."""

from bandwall.measure.importers.nccl_tests import Block, import_log, parse_log

__all__ = ["Block", "import_log", "parse_log"]
