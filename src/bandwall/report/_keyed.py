"""A table whose keys are never split: one row per entry where it fits, one block where not.

Keys are what a user types next (`--preset ai-factory-ib`), so a key folded over two lines
(`ai-factory-i│b`) is a wrong answer, not a cosmetic one. The key column and the columns marked
`whole` (numbers, dates) never wrap; prose columns fold. When even that needs more than the
terminal's width, each entry prints as a block: the key on its own line, then `label  value`
lines whose values wrap under themselves. The choice is made at render time from the
console's width, so the same object fits a pipe (80 columns) and a wide terminal.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from rich.console import Console, ConsoleOptions, RenderResult
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

#: The narrowest a folding (prose) column may get before the table turns into blocks.
MIN_PROSE_WIDTH = 12


@dataclass
class Column:
    header: str
    whole: bool = False
    """Never wrap (numbers, dates, keys): the column is as wide as its longest cell."""
    right: bool = False


@dataclass
class KeyedTable:
    """Rows keyed by their first cell; see the module docstring for the layout rule."""

    title: str
    columns: Sequence[Column]
    rows: list[list[str]] = field(default_factory=list)

    def add_row(self, *cells: str) -> None:
        self.rows.append(list(cells))

    def _min_width(self) -> int:
        """Width the one-row-per-entry table needs with prose folded to MIN_PROSE_WIDTH."""
        total = 1  # left edge
        for i, col in enumerate(self.columns):
            longest = max([len(col.header)] + [len(r[i]) for r in self.rows])
            if i == 0 or col.whole:
                width = max(longest, len(col.header))
            else:  # prose folds between words, never inside one (`preset=ai-factory-ib`)
                words = max([_longest_word(col.header)] + [_longest_word(r[i]) for r in self.rows])
                width = min(longest, max(MIN_PROSE_WIDTH, words))
            total += width + 3  # one space of padding each side and a rule
        return total

    def _table(self) -> Table:
        t = Table(title=self.title)
        for i, col in enumerate(self.columns):
            whole = i == 0 or col.whole
            t.add_column(
                col.header,
                justify="right" if col.right else "left",
                no_wrap=whole,
                overflow="fold",
                min_width=(
                    max(len(r[i]) for r in self.rows)
                    if whole
                    else max(_longest_word(r[i]) for r in self.rows)
                )
                if self.rows
                else None,
            )
        for r in self.rows:
            t.add_row(*r)
        return t

    def _blocks(self) -> Iterable[Table | Padding | Text]:
        yield Text(self.title, style="italic", justify="center")
        label_width = max(len(c.header) for c in self.columns[1:])
        for r in self.rows:
            yield Text(r[0], style="bold", no_wrap=True)
            grid = Table.grid(padding=(0, 2))
            grid.add_column(no_wrap=True, min_width=label_width)
            grid.add_column(overflow="fold")
            for col, cell in zip(self.columns[1:], r[1:], strict=True):
                grid.add_row(col.header, cell)
            yield Padding(grid, (0, 0, 0, 2), expand=False)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if self.rows and self._min_width() > options.max_width:
            yield from self._blocks()
        else:
            yield self._table()


def _longest_word(text: str) -> int:
    return max((len(w) for w in text.split()), default=0)
