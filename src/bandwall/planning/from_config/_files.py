"""Parse JSON, TOML and YAML into flat `{dotted.key: (value, line)}` maps, bounded.

The standard parsers give no line numbers, so a linear scan of the text finds the line of each
key (JSON: a small tokenizer tracking the nesting; TOML: `[table]` headers and `key =` lines);
YAML's composer gives marks. Every input is bounded: a depth limit (deep JSON or YAML is an
error, not a RecursionError), a node budget (YAML aliases cannot multiply the work), and the
byte cap safeio applies before any parser runs.
"""

from __future__ import annotations

import json
import re
import tomllib
from typing import Any

from bandwall.errors import ConfigError
from bandwall.planning.from_config.common import FIELD

#: Deepest nesting a config file may have (real configs stay under 10).
MAX_DEPTH = 32
#: Most keys and list items one file may hold.
MAX_NODES = 200_000

Flat = dict[str, tuple[Any, int | None]]


def _error(path: str, reason: str, line: int | None = None) -> ConfigError:
    where = f"{path}:{line}" if line else path
    return ConfigError(f"{where}: {reason}", field=FIELD)


def _flatten(doc: Any, lines: dict[str, int], path: str) -> Flat:
    out: Flat = {}
    budget = [MAX_NODES]

    def walk(node: Any, prefix: str, depth: int) -> None:
        budget[0] -= 1
        if budget[0] < 0:
            raise _error(path, f"more than {MAX_NODES:,} entries")
        if depth > MAX_DEPTH:
            raise _error(path, f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, dict) and node:
            for k, v in node.items():
                walk(v, f"{prefix}.{k}" if prefix else str(k), depth + 1)
            return
        if isinstance(node, list):
            for item in node:
                walk(item, prefix, depth + 1)
                budget[0] -= 1
        out[prefix] = (node, lines.get(prefix))

    walk(doc, "", 0)
    out.pop("", None)
    return out


_JSON_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|[{}\[\]:,\n]')


def _json_lines(text: str) -> dict[str, int]:
    """The line of each object key path, by one pass over the JSON tokens."""
    lines: dict[str, int] = {}
    stack: list[str | None] = []  # for each open container: the key path (None for arrays)
    line = 1
    pending: str | None = None
    last_string: str | None = None
    for m in _JSON_TOKEN.finditer(text):
        tok = m.group(0)
        if tok == "\n":
            line += 1
        elif tok == "{" or tok == "[":
            stack.append(pending if pending is not None else (stack[-1] if stack else ""))
            pending = None
        elif tok in "}]":
            if stack:
                stack.pop()
            pending = None
        elif tok == ":":
            if last_string is not None and stack:
                base = stack[-1] or ""
                pending = f"{base}.{last_string}" if base else last_string
                lines.setdefault(pending, line)
        elif tok == ",":
            pending = None
        else:
            try:
                last_string = json.loads(tok)
            except ValueError:
                last_string = None
            continue
        last_string = None
    return lines


def load_json(text: str, path: str) -> Flat:
    depth = 0
    for ch in text:  # refuse deep nesting before the parser recurses into it
        if ch in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise _error(path, f"JSON nested deeper than {MAX_DEPTH} levels")
        elif ch in "]}":
            depth -= 1
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _error(path, f"invalid JSON: {exc.msg} (column {exc.colno})", exc.lineno) from None
    except RecursionError:
        raise _error(path, "JSON nested too deeply") from None
    except ValueError:  # not a JSONDecodeError: an integer past Python's 4,300-digit limit
        raise _error(path, "invalid JSON: an integer of over 4,300 digits") from None
    if not isinstance(doc, dict):
        raise _error(path, "a config file must hold a JSON object")
    return _flatten(doc, _json_lines(text), path)


_TOML_TABLE = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")
_TOML_KEY = re.compile(r'^\s*([A-Za-z0-9_\-."\' ]+?)\s*=')


def _toml_lines(text: str) -> dict[str, int]:
    lines: dict[str, int] = {}
    table = ""
    for number, line in enumerate(text.splitlines(), 1):
        m = _TOML_TABLE.match(line)
        if m:
            table = m.group(1).replace('"', "").replace("'", "").replace(" ", "")
            lines.setdefault(table, number)
            continue
        k = _TOML_KEY.match(line)
        if k:
            key = k.group(1).replace('"', "").replace("'", "").replace(" ", "")
            lines.setdefault(f"{table}.{key}" if table else key, number)
    return lines


def load_toml(text: str, path: str) -> Flat:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"line (\d+)", str(exc))
        raise _error(
            path, f"invalid TOML: {str(exc).split(' (at')[0]}", int(m.group(1)) if m else None
        ) from None
    except RecursionError:
        raise _error(path, "TOML nested too deeply") from None
    except ValueError:  # not a TOMLDecodeError: an integer past Python's 4,300-digit limit
        raise _error(path, "invalid TOML: an integer of over 4,300 digits") from None
    return _flatten(doc, _toml_lines(text), path)


def load_yaml(text: str, path: str) -> Flat:  # noqa: C901
    """A YAML mapping, flattened, with each key's line; PyYAML is an extra."""
    try:
        import yaml  # type: ignore[import-untyped]
    except ImportError:
        raise _error(path, "reading YAML needs PyYAML: pip install 'bandwall[yaml]'") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise _error(path, f"invalid YAML: {reason}", line) from None
    except RecursionError:
        raise _error(path, "YAML nested too deeply") from None
    if node is None:
        return {}
    if not isinstance(node, yaml.MappingNode):
        raise _error(path, "a config file must hold a YAML mapping")
    out: Flat = {}
    budget = [MAX_NODES]
    constructor = yaml.SafeLoader("")

    def walk(n: Any, prefix: str, depth: int, line: int) -> Any:
        budget[0] -= 1
        if budget[0] < 0:
            raise _error(path, f"more than {MAX_NODES:,} entries (YAML aliases?)")
        if depth > MAX_DEPTH:
            raise _error(path, f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(n, yaml.MappingNode):
            if not n.value:
                out[prefix] = ({}, line)
            for k, v in n.value:
                key = str(k.value)
                walk(v, f"{prefix}.{key}" if prefix else key, depth + 1, k.start_mark.line + 1)
            return None
        if isinstance(n, yaml.SequenceNode):
            items = [walk_item(item, depth + 1) for item in n.value]
            out[prefix] = (items, line)
            return None
        try:
            value = constructor.construct_object(n, deep=True)
        except yaml.YAMLError as exc:
            raise _error(path, f"invalid YAML value: {exc}", line) from None
        except ValueError:  # an integer past Python's 4,300-digit limit
            raise _error(
                path, "invalid YAML value: an integer of over 4,300 digits", line
            ) from None
        out[prefix] = (value, line)
        return None

    def walk_item(n: Any, depth: int) -> Any:
        budget[0] -= 1
        if budget[0] < 0:
            raise _error(path, f"more than {MAX_NODES:,} entries (YAML aliases?)")
        if depth > MAX_DEPTH:
            raise _error(path, f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(n, yaml.ScalarNode):
            try:
                return constructor.construct_object(n)
            except (yaml.YAMLError, ValueError):  # ValueError: an int of over 4,300 digits
                return n.value
        if isinstance(n, yaml.SequenceNode):
            return [walk_item(i, depth + 1) for i in n.value]
        return "{...}"

    walk(node, "", 0, 1)
    return _resolve(out)


_INTERP = re.compile(r"^\$\{([A-Za-z0-9_.]+)\}$")


def _resolve(flat: Flat) -> Flat:
    """Hydra/OmegaConf references to another key of the same file (`${model.x}`, also with the
    launcher's `training.` prefix) replaced by that key's value; others are kept as text."""
    out = dict(flat)
    for key, (value, line) in flat.items():
        if not isinstance(value, str):
            continue
        m = _INTERP.match(value.strip())
        if not m:
            continue
        ref = m.group(1)
        for candidate in (ref, ref.removeprefix("training.")):
            if candidate in flat and not isinstance(flat[candidate][0], str | dict):
                out[key] = (flat[candidate][0], line)
                break
    return out


__all__ = ["Flat", "load_json", "load_toml", "load_yaml"]
