"""Read a shell launch script (Slurm batch file, torchrun/deepspeed/srun line, a Megatron-LM
`train_*.sh`) the way bash would for the settings that matter, without running anything.

What it does: collects one-line variable assignments (`NAME=value`, `export`, `${NAME:-x}`
defaults, `$((A*B))` arithmetic on whole numbers), seeds the Slurm variables from `#SBATCH`
lines (`$SLURM_NNODES` from `--nodes`), follows `if [[ ... ]]` branches whose test it can
evaluate (string and integer comparisons, `-z`/`-n`), and returns every `--flag value` with its
line and the program it was given to (torchrun, srun, deepspeed, mpirun, accelerate, or the
training script). It does not read heredocs or `case` blocks (argument parsing), and leaves a
variable it cannot resolve as `$NAME`, which the mapping then reports.

Work is linear in the file: no regex runs on more than one line, lines are capped by safeio.
"""

from __future__ import annotations

import ast
import operator
import re
from dataclasses import dataclass, field

#: Programs whose flags the launch table reads, by the token that names them.
PROGRAMS = {
    "torchrun": "torchrun",
    "torch.distributed.run": "torchrun",
    "torch.distributed.launch": "torchrun",
    "srun": "srun",
    "sbatch": "srun",
    "salloc": "srun",
    "deepspeed": "deepspeed",
    "mpirun": "mpirun",
    "mpiexec": "mpirun",
    "accelerate": "accelerate",
}
_ASSIGN = re.compile(
    r"^(?:export\s+|declare\s+(?:-\w+\s+)?|local\s+|readonly\s+)?([A-Za-z_]\w*)(\+?=)(.*)$"
)
_VAR = re.compile(r"\$\{([A-Za-z_]\w*|\d+)(?:(:?[-=])([^}]*))?\}|\$([A-Za-z_]\w*|\d)")
_ARITH = re.compile(r"\$\(\(([^()]*(?:\([^()]*\)[^()]*)*)\)\)")
_HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?")
_SBATCH = re.compile(r"^#SBATCH\s+(.*)$")
#: Slurm variables a batch script may read, from its #SBATCH options.
_SLURM_VARS = {
    "nodes": ("SLURM_NNODES", "SLURM_JOB_NUM_NODES"),
    "n": ("SLURM_NTASKS",),
    "ntasks": ("SLURM_NTASKS",),
    "ntasks_per_node": ("SLURM_NTASKS_PER_NODE",),
    "gpus_per_node": ("SLURM_GPUS_PER_NODE", "SLURM_GPUS_ON_NODE"),
}
_MAX_VARS = 10_000
#: Longest value a variable may hold: no launch setting is longer, and without a bound a
#: script of doubling assignments (A1="$A0 $A0", ...) grows to gigabytes in 40 lines.
_MAX_VALUE_CHARS = 4096
#: What a variable past that length holds instead: '${NAME:too-long}' (not a form _VAR
#: expands).
TOO_LONG = ":too-long"
#: The marker of a variable whose value the file does not settle: set differently in the
#: branches of an `if` it cannot decide, or inside a loop (fuzz round 22, B5: the `then`
#: value was taken without a word, and a loop's updates ignored).
UNSETTLED = ":unsettled"


@dataclass
class Flag:
    """One `--name value...` as the script gives it."""

    name: str
    """Normalised: leading dashes dropped, '-' as '_' (`--num-layers` is `num_layers`)."""
    raw: str
    values: list[str]
    line: int
    program: str
    """torchrun, srun, deepspeed, mpirun, accelerate, or 'script' (the training program)."""
    conditional: bool = False
    """Inside an if-branch whose test could not be evaluated."""

    @property
    def text(self) -> str:
        return " ".join(self.values)


@dataclass
class Script:
    flags: list[Flag] = field(default_factory=list)
    variables: dict[str, str] = field(default_factory=dict)
    notes: list[tuple[int, str]] = field(default_factory=list)
    programs: set[str] = field(default_factory=set)


def _strip_comment(line: str) -> str:
    """The line without a trailing `# comment` (a '#' outside quotes after a space)."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line


def _arith(expr: str) -> str | None:
    """A whole-number arithmetic expression (+ - * / % and parentheses), or None."""
    ops = {
        ast.Add: operator.add,
        ast.Sub: operator.sub,
        ast.Mult: operator.mul,
        ast.FloorDiv: operator.floordiv,
        ast.Div: operator.floordiv,
        ast.Mod: operator.mod,
    }

    def ev(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in ops:
            left, right = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Div | ast.FloorDiv | ast.Mod) and right == 0:
                raise ValueError("division by zero")
            value = int(ops[type(node.op)](left, right))
            if abs(value) > 1 << 62:
                raise ValueError("too large")
            return value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        raise ValueError("not arithmetic")

    text = expr.strip()
    if len(text) > 200 or not re.fullmatch(r"[\d\s+\-*/%()]+", text):
        return None
    try:
        return str(ev(ast.parse(text, mode="eval").body))
    except (ValueError, SyntaxError, RecursionError):
        return None


class _Expander:
    def __init__(self, variables: dict[str, str]) -> None:
        self.vars = variables

    def __call__(self, text: str) -> str:
        def sub(m: re.Match[str]) -> str:
            name = m.group(1) or m.group(4)
            if name in self.vars:
                return self.vars[name]
            if m.group(2) is not None:  # ${NAME:-default}
                default = m.group(3) or ""
                return default.strip("'\"")
            return m.group(0)

        out = _VAR.sub(sub, text)
        return _ARITH.sub(lambda m: _arith(m.group(1)) or m.group(0), out)


def _words(text: str) -> list[str]:
    """Whitespace-separated words with quotes removed (quotes group words in bash, but the
    flags and values bandwall reads never contain spaces)."""
    return [w for w in text.replace('"', " ").replace("'", " ").split() if w not in ("\\",)]


def _condition(line: str) -> str | None:
    """The test of an `if`/`elif` line (`if [[ X ]]; then` -> `[[ X ]]`), else None. String
    operations, not a regex: linear whatever the line."""
    text = line.strip()
    for keyword in ("if ", "elif "):
        if text.startswith(keyword):
            body = text[len(keyword) :].strip()
            if body.endswith("then"):
                body = body[:-4].rstrip()
            return body.rstrip(";").rstrip()
    return None


def _evaluate(test: str) -> bool | None:
    """The truth of a `[[ ... ]]` / `[ ... ]` test joined by || and &&, or None if unknown."""
    parts = [p.strip() for p in re.split(r"(\|\||&&)", test.strip())]
    result: bool | None = None
    op = ""
    for part in parts:
        if part in ("||", "&&"):
            op = part
            continue
        value = _one_test(part)
        if value is None:
            return None
        result = value if result is None else (result or value if op == "||" else result and value)
    return result


def _one_test(text: str) -> bool | None:
    t = text.strip()
    for a, b in (("[[", "]]"), ("[", "]")):
        if t.startswith(a) and t.endswith(b):
            t = t[len(a) : -len(b)].strip()
            break
    else:
        return None
    words = [w.strip("'\"") for w in t.split()]
    negate = bool(words) and words[0] == "!"
    if negate:
        words = words[1:]
    result: bool | None = None
    if len(words) == 2 and words[0] in ("-z", "-n"):
        if "$" in words[1]:
            return None
        result = (words[1] == "") == (words[0] == "-z")
    elif len(words) == 1 and words[0].startswith("-z"):
        result = True
    elif len(words) == 3:
        left, op, right = words
        if "$" in left or "$" in right:
            return None
        if op in ("==", "="):
            result = left == right
        elif op == "!=":
            result = left != right
        elif op in ("-eq", "-ne", "-lt", "-le", "-gt", "-ge"):
            try:
                x, y = int(left), int(right)
            except ValueError:
                return None
            result = {
                "-eq": x == y,
                "-ne": x != y,
                "-lt": x < y,
                "-le": x <= y,
                "-gt": x > y,
                "-ge": x >= y,
            }[op]
    if result is None:
        return None
    return not result if negate else result


def _logical_lines(
    lines: list[str], notes: list[tuple[int, str]] | None = None
) -> list[tuple[int, list[tuple[str, int]]]]:
    """Physical lines joined where one ends with a backslash: (first line number, [(text,
    line number)...]) with comments removed. A comment line inside a continued command is
    skipped and the command read on, as its author meant; bash ends the command there, so
    `notes` gets a line saying the flags after it never reach the program (fuzz round 22,
    D2)."""
    out: list[tuple[int, list[tuple[str, int]]]] = []
    current: list[tuple[str, int]] = []
    start = 0
    for number, raw in enumerate(lines, 1):
        stripped = raw.strip()
        if stripped.startswith("#") and not stripped.startswith("#SBATCH"):
            if current and raw.rstrip().endswith("\\"):
                if notes is not None:
                    notes.append(
                        (
                            number,
                            "a comment inside a continued command ends it in bash: the "
                            "flags after it are read, but bash does not pass them",
                        )
                    )
                continue
            if not current:
                out.append((number, [("", number)]))
                continue
        text = raw if stripped.startswith("#SBATCH") else _strip_comment(raw)
        cont = text.rstrip().endswith("\\")
        if cont:
            text = text.rstrip()[:-1]
        if not current:
            start = number
        current.append((text, number))
        if not cont:
            out.append((start, current))
            current = []
    if current:
        out.append((start, current))
    return out


def parse_script(lines: list[str]) -> Script:  # noqa: C901
    """Every flag of a shell script with its line, program and branch."""
    script = Script()
    expand = _Expander(script.variables)
    # #SBATCH first: the Slurm variables hold for the whole script
    for number, raw in enumerate(lines, 1):
        m = _SBATCH.match(raw.strip())
        if not m:
            continue
        options = _words(_strip_comment(m.group(1)))
        _collect(options, [number] * len(options), "srun", False, script)
    for f in script.flags:
        for var in _SLURM_VARS.get(f.name, ()):
            if f.values and f.values[0].isdigit():
                script.variables.setdefault(var, f.values[0])
        if f.name == "N" and f.values and f.values[0].isdigit():
            script.variables.setdefault("SLURM_NNODES", f.values[0])
            script.variables.setdefault("SLURM_JOB_NUM_NODES", f.values[0])
    # branches: a stack of (taking this branch?, a branch already taken?, unknown?)
    stack: list[list[bool | None]] = []
    skip_until: str | None = None
    case_depth = 0
    loop_depth = 0
    for start, parts in _logical_lines(lines, script.notes):
        joined = " ".join(t for t, _ in parts).strip()
        if skip_until is not None:
            if joined == skip_until:
                skip_until = None
            continue
        if not joined or joined.startswith("#SBATCH"):
            continue
        head = joined.split()[0]
        if head == "case":
            case_depth += 1
            script.notes.append((start, "case block not read (argument parsing)"))
            continue
        if case_depth:
            if head == "esac" or joined.endswith("esac"):
                case_depth -= 1
            continue
        test = _condition(joined)
        if test is not None and head in ("if", "elif") and not joined.rstrip(";").endswith("fi"):
            value = _evaluate(expand(test))
            if head == "if":
                stack.append([value, bool(value), value is None])
            elif stack:
                frame = stack[-1]
                taken = bool(frame[1])
                frame[0] = None if value is None else (value and not taken)
                frame[1] = taken or bool(value)
                frame[2] = bool(frame[2]) or value is None
            continue
        if head == "else" and stack:
            frame = stack[-1]
            frame[0] = None if frame[2] else not frame[1]
            continue
        if head == "fi" and stack:
            stack.pop()
            continue
        if head in ("for", "while", "until"):
            if not joined.rstrip(";").endswith("done"):
                loop_depth += 1
                continue
            # a loop on one line: what it assigns is unsettled
            body = joined.split(" do ", 1)[-1] if " do " in joined else ""
            for name in re.findall(r"(?:^|[;\s])([A-Za-z_]\w*)\+?=", body):
                script.variables[name] = "${" + name + UNSETTLED + "}"
            continue
        if head == "done" and loop_depth:
            loop_depth -= 1
            continue
        if any(f[0] is False for f in stack):
            continue
        conditional = any(f[0] is None for f in stack)
        here = _HEREDOC.search(_ARITH.sub("", joined))  # not a shift in $(( 1 << 62 ))
        if here:
            skip_until = here.group(1)
            script.notes.append((start, f"heredoc <<{skip_until} not read"))
        a = _ASSIGN.match(joined)
        if a and not a.group(3).startswith("("):
            rhs = _strip_comment(a.group(3)).strip()
            if not rhs.endswith("\\") and len(parts) == 1 and len(script.variables) < _MAX_VARS:
                text = expand(rhs.strip("'\"") if rhs[:1] in "'\"" else rhs)
                if a.group(2) == "+=":
                    text = script.variables.get(a.group(1), "") + text
                if len(text) > _MAX_VALUE_CHARS:
                    # held as a marker that does not expand further, so a setting read from
                    # it is refused by name (common.TOO_LONG)
                    script.notes.append(
                        (start, f"${a.group(1)} would hold over {_MAX_VALUE_CHARS:,} characters")
                    )
                    text = "${" + a.group(1) + TOO_LONG + "}"
                name = a.group(1)
                before = script.variables.get(name)
                # the value depends on an iteration, or on which of two settled values an
                # undecided `if` chooses (where one still holds a variable the file does
                # not set, the first is kept, as before)
                unsettled = loop_depth > 0 or (
                    conditional and before is not None and before != text
                    and "$" not in before + text
                )  # fmt: skip
                if unsettled:
                    text = "${" + name + UNSETTLED + "}"
                if unsettled or not conditional or before is None:
                    script.variables[name] = text
                continue
        words: list[str] = []
        numbers: list[int] = []
        for text, number in parts:
            for w in _words(expand(text)):
                words.append(w)
                numbers.append(number)
        _collect(words, numbers, "script", conditional, script)
    return script


def _program(word: str) -> str | None:
    base = word.rsplit("/", 1)[-1]
    return PROGRAMS.get(base)


def _is_flag(word: str) -> bool:
    return word.startswith("-") and len(word) > 1 and not re.match(r"^-\d", word)


#: Commands whose flags are not settings of the job (file and shell utilities).
_UTILITIES = frozenset(
    [
        "mkdir",
        "echo",
        "printf",
        "set",
        "cd",
        "cp",
        "mv",
        "rm",
        "ln",
        "tee",
        "cat",
        "ls",
        "head",
        "tail",
        "grep",
        "sed",
        "awk",
        "sort",
        "date",
        "source",
        "module",
        "conda",
        "pip",
        "wget",
        "curl",
        "git",
        "chmod",
        "touch",
        "sleep",
        "scontrol",
        "hostname",
        "dirname",
        "basename",
        "nvidia-smi",
        "wait",
        "kill",
        "trap",
        "exit",
        "unset",
    ]
)
_SEPARATORS = frozenset({"|", "||", "&&", ";", "&", "2>&1", ">", ">>", "2>", "1>"})
#: Programs whose one-dash flags the launch table reads (`srun -N 2`, `mpirun -np 16`).
_SHORT_FLAGS = frozenset({"srun", "mpirun", "torchrun", "deepspeed"})


def _collect(
    words: list[str], numbers: list[int], program: str, conditional: bool, script: Script
) -> None:
    current: Flag | None = None
    at_command = True
    skipping = False
    for word, number in zip(words, numbers, strict=True):
        if word in _SEPARATORS:
            at_command, skipping, current = True, False, None
            continue
        if at_command and not word.startswith("-") and "=" not in word:
            at_command = False
            skipping = word.rsplit("/", 1)[-1] in _UTILITIES
        if skipping:
            continue
        prog = _program(word)
        if prog is not None and not word.startswith("-"):
            program = prog
            script.programs.add(prog)
            current = None
            continue
        if word.endswith(".py") and not word.startswith("-"):
            program = "script"
            script.programs.add("script")
            current = None
            continue
        if _is_flag(word):
            current = None
            if not word.startswith("--") and program not in _SHORT_FLAGS:
                continue
            name, _, value = word.lstrip("-").partition("=")
            current = Flag(
                name.replace("-", "_"), word.split("=", 1)[0], [], number, program, conditional
            )
            if value:
                current.values.append(value)
            script.flags.append(current)
            continue
        if current is None or len(current.values) >= 16:
            continue
        if current.values and word.startswith("$"):
            current = None  # `--x 4 $OTHER_ARGS`: the variable is not a second value
            continue
        current.values.append(word)


__all__ = ["PROGRAMS", "Flag", "Script", "parse_script"]
