"""Field descriptions from attribute docstrings, read once per module.

Pydantic's `use_attribute_docstrings` finds each class's source by tokenizing it again for
every model (~90 ms of `bandwall plan`'s start for eleven request models). This reads each
module's syntax tree once and fills the same descriptions, by the same rule: a string
statement right after an annotated assignment in the class body (pydantic's
`_docs_extraction.DocstringVisitor`), cleaned by `inspect.cleandoc`.
"""

from __future__ import annotations

import ast
import inspect
import sys
from functools import cache
from typing import Any

from pydantic import BaseModel


@cache
def _module_docs(path: str) -> dict[str, dict[str, str]]:
    """class name -> {attribute: docstring} for the top-level classes of one source file."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=path)
    out: dict[str, dict[str, str]] = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        docs: dict[str, str] = {}
        for before, stmt in zip(node.body, node.body[1:], strict=False):
            if (
                isinstance(before, ast.AnnAssign)
                and isinstance(before.target, ast.Name)
                and isinstance(stmt, ast.Expr)
                and isinstance(stmt.value, ast.Constant)
                and isinstance(stmt.value.value, str)
            ):
                docs[before.target.id] = inspect.cleandoc(stmt.value.value)
        out[node.name] = docs
    return out


class DocumentedModel(BaseModel):
    """A base whose subclasses take their fields' descriptions from attribute docstrings.
    Subclasses build their validators lazily (`defer_build`), so the descriptions set here
    reach the JSON schema too."""

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        path = getattr(sys.modules.get(cls.__module__), "__file__", None)
        if path is None:
            return
        docs = _module_docs(path).get(cls.__name__, {})
        for name, info in cls.__pydantic_fields__.items():
            if info.description is None and name in docs:
                info.description = docs[name]
