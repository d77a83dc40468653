"""Doctor's own formats: NCCL debug logs (with the PyTorch lines around them), nccl-tests
result tables and torch.profiler traces. Registered on import (see `formats.formats`)."""

from __future__ import annotations

import re
from typing import Any

from bandwall.measure.doctor.evidence import Line
from bandwall.measure.doctor.formats import Format, register_format
from bandwall.measure.doctor.job import Input, Job, TestBlock
from bandwall.measure.doctor.nccl_log import _TABLE_ROW, _TOOL_PREFIX, NcclLog, _Parser, understood

_TABLE_HEADER = re.compile(r"#\s+size\s+count\s", re.IGNORECASE)


class _LogParser:
    def __init__(self, source: str) -> None:
        self._p = _Parser(source)

    def feed(self, number: int, line: str) -> None:
        self._p.feed(number, line)

    def finish(self) -> NcclLog:
        return self._p.log


def _attach_log(job: Job, log: NcclLog, item: Input) -> bool:
    if not understood(log):
        return False
    job.logs.append(log)
    note = f"{log.records:,} NCCL records, {log.matched:,} lines used"
    if log.timeouts:
        note += f"; {len(log.timeouts):,} watchdog timeout(s)"
    if log.connections:
        note += f"; {len(log.connections):,} connection(s)"
    if log.not_understood:
        ex = log.examples[0]
        note += (
            f"; {log.not_understood:,} NCCL line(s) not understood, e.g. line {ex.number}: "
            f"{ex.text.strip()[:80]!r}"
        )
    item.notes.append(note)
    return True


class _TestsParser:
    """Keeps only the lines the nccl-tests importer reads (bounded), with their numbers."""

    #: At most this many characters of table lines are kept (a 200 MB log stays bounded).
    BUDGET_CHARS = 8 << 20

    def __init__(self, source: str) -> None:
        self.source = source
        self.lines: list[tuple[int, str]] = []
        self._chars = 0

    def feed(self, number: int, line: str) -> None:
        body = _TOOL_PREFIX.sub("", line, count=1).lstrip()
        if not (
            body.startswith("#")
            or _TABLE_ROW.match(body)
            or "_perf" in body
            or "nThread" in body
            or body.startswith("NCCL version")
        ):
            return
        if self._chars + len(line) > self.BUDGET_CHARS:
            return
        self._chars += len(line)
        self.lines.append((number, line))

    def finish(self) -> list[TestBlock]:
        if not any(_TABLE_HEADER.search(t) for _, t in self.lines):
            return []
        from bandwall.errors import ConfigError
        from bandwall.measure.importers.nccl_tests import parse_log, resolve, store_rows

        numbers = [n for n, _ in self.lines]
        blocks = parse_log("\n".join(t for _, t in self.lines))
        out: list[TestBlock] = []
        for block in blocks:
            first = numbers[block.first_line - 1] if 0 < block.first_line <= len(numbers) else 0
            text = next((t for n, t in self.lines if n == first), "")
            tb = TestBlock(
                source=self.source,
                first_line=first,
                op=None,
                ranks=None,
                rows=[],
                devices=[str(r["device_name"]) for r in block.ranks if r.get("device_name")],
                hosts=sorted({str(r["hostname"]) for r in block.ranks if r.get("hostname")}),
                line=Line(self.source, first, text) if text else None,
            )
            tb.block = block  # type: ignore[attr-defined]
            for row in block.rows:
                sides = (row.out_of_place, row.in_place)
                if 0 < row.line <= len(self.lines) and any(
                    sd is not None and (sd.wrong or 0) > 0 for sd in sides
                ):
                    # the row's line of the kept text: its file line number and its text
                    n, row_text = self.lines[row.line - 1]
                    tb.wrong_rows.append(Line(self.source, n, row_text))
            try:
                op, ranks, _ = resolve(block, None, None)
                tb.op, tb.ranks = op.value, ranks
                tb.rows = store_rows(block, op, ranks)
            except ConfigError as exc:
                tb.not_compared = exc.reason
            out.append(tb)
        return out


def _attach_tests(job: Job, blocks: list[TestBlock], item: Input) -> bool:
    if not blocks:
        return False
    for b in blocks:
        if b.op is None and (job.options.get("op") or job.options.get("ranks")):
            _resolve_with_options(b, job.options)
        job.tests.append(b)
        item.notes.append(
            f"nccl-tests block at line {b.first_line}: {b.op or 'collective unknown'} on "
            f"{b.ranks or '?'} ranks, {len({r['size_bytes'] for r in b.rows})} sizes"
            + (f" ({b.not_compared})" if b.not_compared and b.op is None else "")
        )
    return True


def _resolve_with_options(b: TestBlock, opts: dict[str, Any]) -> None:
    from bandwall.errors import ConfigError
    from bandwall.measure.importers.nccl_tests import resolve, store_rows

    block = getattr(b, "block", None)
    if block is None:
        return
    try:
        op, ranks, _ = resolve(block, opts.get("op"), opts.get("ranks"))
        rows = store_rows(block, op, ranks)  # refuses a block of several types (-d all)
    except ConfigError as exc:
        b.not_compared = exc.reason
        return
    b.op, b.ranks, b.not_compared = op.value, ranks, ""
    b.rows = rows


register_format(Format("nccl-log", lambda s: True, _LogParser, _attach_log))
register_format(Format("nccl-tests", lambda s: True, _TestsParser, _attach_tests))
