"""Plan from a framework's own files: `bandwall plan --from FILE` (repeatable).

Reads Megatron-LM launch scripts and argument dumps, NeMo / Megatron-Bridge YAML, torchtitan
TOML, DeepSpeed JSON, HuggingFace config.json and Slurm / torchrun / deepspeed launch lines,
and maps every setting to the one request schema (`PlanRequest`), keeping where each value
came from. Each format is a module holding its field table as data (`TABLE`: key -> request
field, converter, note) and the rules that need several keys (`derive`); `common` is the one
engine. The result lists what was read, what took the framework's default and what was
ignored, with the file and line, so nothing is silently dropped.

    >>> from bandwall.planning.from_config import FORMATS
    >>> [spec.name for spec in FORMATS]
    ['launch', 'hf', 'megatron', 'nemo', 'torchtitan', 'deepspeed', 'trainer']
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bandwall.errors import ConfigError
from bandwall.planning.from_config import (
    _files,
    deepspeed,
    hf,
    launch,
    megatron,
    nemo,
    shell,
    torchtitan,
    trainer,
)
from bandwall.planning.from_config.common import (
    FIELD,
    Assign,
    Context,
    Default,
    Entry,
    FormatSpec,
    Ignored,
    Level,
    Mapped,
    Problem,
    Source,
    Values,
    apply_table,
    combine,
    leftovers,
    merge_entries,
    to_int,
)

#: Every format, in the order their derived rules run (a later one may need an earlier one's
#: fields: the launch gives the GPU count a torchtitan global batch needs).
FORMATS: tuple[FormatSpec, ...] = (
    launch.SPEC,
    hf.SPEC,
    megatron.SPEC,
    nemo.SPEC,
    torchtitan.SPEC,
    deepspeed.SPEC,
    trainer.SPEC,
)
_BY_NAME = {spec.name: spec for spec in FORMATS}
#: Largest config file read whole (scripts and logs are streamed).
MAX_CONFIG_BYTES = 16 << 20
_SNIFF_BYTES = 1 << 16
_TEXT_SUFFIXES = (".sh", ".slurm", ".sbatch", ".bash", ".log", ".txt", ".out", ".err", ".cmd")


@dataclass
class FromConfig:
    """What the files say, as request fields with their provenance."""

    files: list[tuple[str, str]] = field(default_factory=list)
    """(path, what it was read as)."""
    read: list[Assign] = field(default_factory=list)
    defaulted: list[Default] = field(default_factory=list)
    ignored: list[Ignored] = field(default_factory=list)
    overridden: list[str] = field(default_factory=list)
    """Fields the files set that the command line gives itself."""
    notes: list[str] = field(default_factory=list)

    @property
    def fields(self) -> dict[str, Any]:
        """Request fields, files then defaults (the command line is merged by the caller)."""
        out = {a.field: a.value for a in self.read}
        out.update({d.field: d.value for d in self.defaulted if d.field not in out})
        return out

    def merged(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """The files' fields under the command line's (an option given wins)."""
        return {**{k: v for k, v in self.fields.items() if k not in given}, **given}

    def to_json(self) -> dict[str, Any]:
        return {
            "files": [{"path": p, "format": f} for p, f in self.files],
            "read": [
                {
                    "field": a.field,
                    "value": a.value,
                    "from": [s.describe() for s in a.sources],
                    **({"note": a.note} if a.note else {}),
                }
                for a in self.read
            ],
            "defaulted": [
                {"field": d.field, "value": d.value, "why": d.why} for d in self.defaulted
            ],
            "ignored": [
                {"file": i.src.file, "line": i.src.line, "key": i.src.key, "why": i.reason}
                for i in self.ignored
            ],
            "overridden_by_command_line": self.overridden,
            "notes": self.notes,
        }


def _check(path: str) -> Path:
    from bandwall.safeio import check_input

    return check_input(path, field=FIELD)


def _head(path: str) -> str:
    from bandwall.safeio import iter_chunks

    chunk = next(iter(iter_chunks(path, field=FIELD, max_bytes=1 << 40)), b"")
    return chunk[:_SNIFF_BYTES].decode("utf-8", errors="replace").replace("\x00", "\ufffd")


def _text(path: str) -> str:
    from bandwall.safeio import read_text

    return read_text(path, field=FIELD, max_bytes=MAX_CONFIG_BYTES)


def _kind(path: str, head: str) -> str:
    """json, toml, yaml, args (a Megatron log with its arguments dump) or shell."""
    suffix = Path(path).suffix.lower()
    if suffix == ".json" or head.lstrip().startswith("{"):
        return "json"
    if suffix == ".toml":
        return "toml"
    if suffix in (".yaml", ".yml"):
        return "yaml"
    if megatron.has_args_dump(head):
        return "args"
    if suffix in _TEXT_SUFFIXES or head.lstrip().startswith(("#!", "#SBATCH")):
        return "shell"
    stripped = [ln.strip() for ln in head.splitlines() if ln.strip() and not ln.startswith("#")]
    if stripped and all(ln.startswith("[") or " = " in ln for ln in stripped[:20]):
        return "toml"
    if stripped and all(":" in ln or ln.startswith("-") for ln in stripped[:20]):
        return "yaml"
    return "shell"


#: Where a multimodal HuggingFace config (Gemma 3, LLaVA, Qwen2-VL, Llama 4, InternVL) keeps
#: its language model: its keys are read as the top-level ones a text-only config has (a Gemma
#: 3 config was refused as "no setting the model uses", fuzz round 19, D1).
_TEXT_CONFIGS = ("text_config.", "llm_config.", "language_config.")


def _text_model(flat: _files.Flat) -> tuple[_files.Flat, dict[str, str]]:
    """The flat config with its language model's keys at the top, and each moved key's name
    in the file (what a source quotes)."""
    out, named = dict(flat), {}
    for key, value in flat.items():
        for prefix in _TEXT_CONFIGS:
            if key.startswith(prefix):
                inner = key[len(prefix) :]
                # the language model's own key wins over the wrapper's (a projector's or
                # vision tower's hidden_size at the top priced 1.76B of an 8B, fuzz 20, C8)
                if inner in hf.TABLE:
                    out[inner] = value
                    named[inner] = key
                    out.pop(key)
    return out, named


def _json_entries(flat: _files.Flat, path: str) -> tuple[str, list[Entry]]:
    named: dict[str, str] = {}
    if any(k.startswith(_TEXT_CONFIGS) for k in flat):
        flat, named = _text_model(flat)
    keys = set(flat)
    ds_keys = {k for k in keys if k.split(".", 1)[0] in _DEEPSPEED_TOP}
    hf_keys = {k for k in keys if k in hf.TABLE}
    if not ds_keys and not hf_keys:
        raise ConfigError(
            f"{path}: a JSON file bandwall does not recognise (neither a HuggingFace "
            "config.json nor a DeepSpeed config)",
            field=FIELD,
        )
    fmt = deepspeed.FMT if len(ds_keys) >= len(hf_keys) else hf.FMT
    return fmt, [
        Entry(fmt, k, v, Source(path, line, named.get(k, k), _short(v)))
        for k, (v, line) in flat.items()
    ]


_DEEPSPEED_TOP = frozenset(
    {
        "train_batch_size",
        "train_micro_batch_size_per_gpu",
        "gradient_accumulation_steps",
        "zero_optimization",
        "fp16",
        "bf16",
        "optimizer",
        "scheduler",
        "gradient_clipping",
        "steps_per_print",
        "wall_clock_breakdown",
        "activation_checkpointing",
        "communication_data_type",
        "zero_allow_untested_optimizer",
    }
)


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _toml_entries(flat: _files.Flat, path: str) -> list[Entry]:
    out = []
    for k, (v, line) in flat.items():
        key = torchtitan.RENAMED.get(k, k)
        out.append(Entry(torchtitan.FMT, key, v, Source(path, line, k, _short(v))))
    return out


def _script_entries(script: shell.Script, path: str) -> tuple[list[Entry], list[str]]:
    megatron_job = any(f.name in megatron.CORE_KEYS for f in script.flags)
    entries: list[Entry] = []
    # named as the report names every source: the file, not the path it was given by
    name = Path(path).name
    notes = [f"{name}:{line}: {text}" for line, text in script.notes]
    for f in script.flags:
        src = Source(path, f.line, f.raw, _short(f.text))
        value: Any = f.values[0] if f.values else True
        if f.conditional:
            notes.append(
                f"{name}:{f.line}: {f.raw} is inside an if-branch bandwall cannot evaluate; "
                "read as if taken"
            )
        if f.program in ("torchrun", "srun", "deepspeed", "mpirun", "accelerate"):
            entries.append(Entry(launch.SPEC.name, f"{f.program}.{f.name}", value, src))
        elif f.name in launch.BARE:
            entries.append(Entry(launch.SPEC.name, launch.BARE[f.name], value, src))
        elif "." in f.name:
            key = torchtitan.RENAMED.get(f.name, f.name)
            entries.append(Entry(torchtitan.FMT, key, value, src, Level.OVERRIDE))
        elif megatron_job:
            entries.append(megatron.entry(f.name, f.values, src))
        else:
            entries.append(Entry(trainer.FMT, f.name, value, src))
    return entries, notes


def read_file(path: str) -> tuple[str, list[Entry], list[str]]:
    """One file as entries: (what it was read as, entries, notes)."""
    from bandwall.safeio import iter_lines

    _check(path)
    head = _head(path)
    sniff = head[:4096]
    if sniff.count("\ufffd") * 20 > len(sniff):  # over 5% undecodable: not text
        # bytes that are not text (an executable, an image, a checkpoint): not a config, and
        # read as a launch script its bytes gave flags that 'contradict' each other
        raise ConfigError(
            f"{path} is a binary file, not a training config, launch script or log",
            field=FIELD,
        )
    kind = _kind(path, head)
    if kind == "json":
        fmt, entries = _json_entries(_files.load_json(_text(path), path), path)
        return _BY_NAME[fmt].label, entries, []
    if kind == "toml":
        return torchtitan.SPEC.label, _toml_entries(_files.load_toml(_text(path), path), path), []
    if kind == "yaml":
        flat = _files.load_yaml(_text(path), path)
        return nemo.SPEC.label, nemo.translate(flat, path), []
    if kind == "args":
        lines = iter_lines(path, field=FIELD)
        entries = megatron.read_args_dump(lines, path)
        return "Megatron-LM arguments dump", entries, []
    script = shell.parse_script(list(iter_lines(path, field=FIELD, max_bytes=MAX_CONFIG_BYTES)))
    entries, notes = _script_entries(script, path)
    if not entries:
        raise ConfigError(
            f"{path}: no settings found (expected a launch script, a Megatron log, or a JSON, "
            "TOML or YAML config)",
            field=FIELD,
        )
    label = "launch script" + (
        " with Megatron-LM arguments" if any(e.fmt == megatron.FMT for e in entries) else ""
    )
    return label, entries, notes


def _given_context(given: Mapping[str, Any]) -> Context:
    """Command-line values the derived rules may need, as numbers where they are numbers."""
    out: Context = {}
    for k, v in given.items():
        if isinstance(v, str):
            try:
                out[k] = to_int(v)
            except ValueError:
                if "," not in v and ":" not in v:
                    out[k] = v
        elif v is not None:
            out[k] = v
    return out


def read_configs(paths: Iterable[str], given: Mapping[str, Any] | None = None) -> FromConfig:
    """Every file's settings as request fields, under the command line's `given` options.

    Raises ConfigError naming the file and line for an unreadable file, a value that does not
    parse, two files that disagree, or a setting the model cannot express (unless `given`
    sets that field).
    """
    given = dict(given or {})
    result = FromConfig()
    by_fmt: dict[str, list[Entry]] = {}
    for path in paths:
        label, entries, notes = read_file(os.fspath(path))
        result.files.append((os.fspath(path), label))
        result.notes += notes
        for e in entries:
            by_fmt.setdefault(e.fmt, []).append(e)
    # the tables first, so every derived rule sees the fields read directly
    state: list[tuple[FormatSpec, Values, Mapped]] = []
    for spec in FORMATS:
        if spec.name not in by_fmt:
            continue
        mapped = Mapped()
        values = Values(merge_entries(by_fmt[spec.name], spec.table, mapped.ignored))
        apply_table(spec.name, spec.table, values, mapped)
        state.append((spec, values, mapped))
    ctx: Context = {}
    for _, _, mapped in state:
        ctx.update({a.field: a.value for a in mapped.assigns})
    ctx.update(_given_context(given))
    results: list[tuple[str, Mapped, list[Default]]] = []
    for spec, values, mapped in state:
        defaults = spec.derive(values, mapped, dict(ctx))
        for a in mapped.assigns:
            a.fmt = a.fmt or spec.name
            if a.field not in given:
                ctx.setdefault(a.field, a.value)
        leftovers(spec.table, values, mapped, spec.unknown)
        _account(values, mapped)
        results.append((spec.name, mapped, defaults))
        result.ignored += mapped.ignored
        result.notes += mapped.notes
    chosen, defaults = combine(results)
    problems = [p for _, m, _ in results for p in m.problems if p.field not in given]
    if problems:
        raise problems[0].error()
    for _, m, _ in results:  # settled by the command line: listed, not raised
        result.ignored += [
            Ignored(p.src, f"the command line gives --{p.field.replace('_', '-')}")
            for p in m.problems
            if p.src is not None
        ]
    used = {src.file for _, m, _ in results for a in m.assigns for src in a.sources}
    used |= {p.src.file for _, m, _ in results for p in m.problems if p.src is not None}
    for path, label in result.files:
        if path not in used:
            raise ConfigError(
                f"{path}: no setting the model uses in this {label} (every key is ignored); "
                "is it the job's config?",
                field=FIELD,
            )
    result.read = [a for a in chosen.values() if a.field not in given]
    result.defaulted = [d for d in defaults if d.field not in given]
    result.overridden = sorted(
        {a.field for a in chosen.values() if a.field in given}
        | {d.field for d in defaults if d.field in given}
    )
    _validate(result)
    return result


def _account(values: Values, mapped: Mapped) -> None:
    """Every entry a rule read without it becoming a field's source is listed too (a Slurm
    allocation when the launcher gives the process count, an unset `null`), so the report
    accounts for every key of every file."""
    seen = {s for a in mapped.assigns for s in a.sources}
    seen |= {i.src for i in mapped.ignored}
    seen |= {p.src for p in mapped.problems if p.src is not None}
    for entry in values.entries.values():
        if entry.src not in seen:
            why = "unset (null)" if entry.value is None else "read; another setting decides"
            mapped.ignored.append(Ignored(entry.src, why))


def _validate(result: FromConfig) -> None:
    """Each field through the request schema, so a bad value names its file and line."""
    from pydantic import ValidationError

    from bandwall.planning.request import PlanRequest, config_error

    for a in result.read:
        if a.field not in PlanRequest.model_fields:
            raise ConfigError(f"internal: unknown request field {a.field}", field=FIELD)
        try:  # the field alone: cross-field rules are checked on the merged request
            try:
                PlanRequest.model_validate({a.field: a.value}, context={"fields_only": True})
            except ValidationError as err:
                raise config_error(err) from None
        except ConfigError as exc:
            where = ", ".join(s.describe() for s in a.sources) or a.fmt
            raise ConfigError(
                f"{where}: --{a.field.replace('_', '-')} {a.value!r}: {exc.reason}", field=FIELD
            ) from None


__all__ = ["FORMATS", "MAX_CONFIG_BYTES", "FromConfig", "Problem", "read_configs", "read_file"]
