"""The one place bandwall reads user files and writes its outputs.

Reads are bounded and streamed: a path must name a regular file (a FIFO would block forever,
``/dev/zero`` never ends, ``/proc`` files lie about their size), at most ``max_bytes`` are read
after decompression (a gzip bomb stops at the cap, not at the end of memory), lines are cut at
``max_line_chars`` (a 60,000-character line must not feed a regex), and a NUL byte or invalid
UTF-8 is replaced, not fatal. Writes check the target first (the folder exists, the target is
not a folder or a device, the suffix is a known format) and are atomic: the data goes to a
temporary file beside the target, renamed over it only once complete, so a full disk or a
crash never leaves half a file, and nothing but the named output changes.

Every error is a :class:`~bandwall.errors.ConfigError` naming the option the path came from.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import os
import stat
import sys
import tempfile
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from bandwall.errors import ConfigError

MIB = 1 << 20
#: Default cap on what one input may hold once decompressed (logs, traces, tables).
MAX_INPUT_BYTES = 512 * MIB
#: Longest line handed to a parser; the rest of the line is dropped.
MAX_LINE_CHARS = 16_384
#: Chunk size of streamed reads.
_CHUNK = 1 << 16
#: Places whose files are not data (kernel interfaces, devices).
_SPECIAL_ROOTS = ("/proc", "/sys", "/dev")
_GZIP_MAGIC = b"\x1f\x8b"
STDIN = "-"
#: Longest path and file name the kernel looks up (Linux PATH_MAX and NAME_MAX, in bytes);
#: past them every lookup fails with ENAMETOOLONG, which pathlib's `is_dir()` does not catch.
MAX_PATH_BYTES = 4095
MAX_NAME_BYTES = 255


def printable(text: object) -> str:
    """`text` with control characters written as escapes: names and keys read from logs and
    files (a hostname, a data type, a config key) must not reach the terminal as escape
    sequences."""
    out = str(text)
    if out.isprintable():
        return out
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in out)


def _flag(field: str) -> str:
    return "--" + field.replace("_", "-")


def checked_path(path: str | os.PathLike[str], *, field: str) -> Path:
    """`path` as a name the OS can look up: no NUL byte (a ValueError from every `os` call),
    at most `MAX_PATH_BYTES` in all and `MAX_NAME_BYTES` per name (else `Path.exists()` and
    `is_dir()` raise ENAMETOOLONG). Only the text is checked: nothing is touched on disk."""
    text = os.fspath(path)
    shown = repr(text) if len(text) <= 60 else repr(text[:57]) + "..."
    if not text.strip():
        raise ConfigError("is empty; give a file name", field=field)
    if "\x00" in text:
        raise ConfigError(f"{shown} holds a NUL byte; give a file name", field=field)
    raw = os.fsencode(text)
    longest = max((len(part) for part in raw.split(b"/")), default=0)
    if len(raw) > MAX_PATH_BYTES or longest > MAX_NAME_BYTES:
        raise ConfigError(
            f"{shown} is too long ({len(raw):,} bytes, longest name {longest:,}); a path is at "
            f"most {MAX_PATH_BYTES:,} bytes and each name in it at most {MAX_NAME_BYTES}",
            field=field,
        )
    return Path(text)


def check_input(path: str | os.PathLike[str], *, field: str) -> Path:
    """`path` as a readable regular file, or a ConfigError naming `field` and what is wrong."""
    p = checked_path(path, field=field)
    resolved = p.resolve() if p.exists() else p
    if any(str(resolved) == r or str(resolved).startswith(r + "/") for r in _SPECIAL_ROOTS):
        raise ConfigError(f"{str(p)!r} is a system file, not a data file", field=field)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise ConfigError(f"no such file: {str(p)!r}", field=field) from None
    except OSError as exc:
        raise ConfigError(f"cannot read {str(p)!r}: {exc.strerror}", field=field) from None
    if stat.S_ISDIR(st.st_mode):
        raise ConfigError(f"{str(p)!r} is a folder; give a file", field=field)
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(
            f"{str(p)!r} is not a regular file (a pipe, socket or device)", field=field
        )
    if not os.access(p, os.R_OK):
        raise ConfigError(f"cannot read {str(p)!r}: permission denied", field=field)
    return p


def _raw_chunks(path: str | os.PathLike[str], field: str) -> Iterator[bytes]:
    """The file's bytes, as stored, in chunks (standard input for '-')."""
    if str(path) == STDIN:
        stream = sys.stdin.buffer
        while chunk := stream.read(_CHUNK):
            yield chunk
        return
    p = check_input(path, field=field)
    try:
        with p.open("rb") as fh:
            while chunk := fh.read(_CHUNK):
                yield chunk
    except OSError as exc:
        raise ConfigError(f"cannot read {str(p)!r}: {exc.strerror}", field=field) from None


def iter_chunks(
    path: str | os.PathLike[str],
    *,
    field: str,
    max_bytes: int = MAX_INPUT_BYTES,
    decompress: bool = True,
) -> Iterator[bytes]:
    """The file's content in chunks, gunzipped when it starts with the gzip magic, and never
    more than `max_bytes` of it (a ConfigError says the file is too large). Text saved as
    UTF-16 with its BOM (what PowerShell's `>` writes) comes out as UTF-8, and UTF-8's own
    BOM is dropped."""
    return _as_utf8(_chunks(path, field=field, max_bytes=max_bytes, decompress=decompress))


def _as_utf8(chunks: Iterator[bytes]) -> Iterator[bytes]:
    first = next(chunks, b"")
    encoding = "utf-16" if first[:2] in (b"\xff\xfe", b"\xfe\xff") else _bomless_utf16(first)
    if encoding is None:
        # UTF-8's BOM (Notepad, PowerShell 5's Out-File) is not content: a config.json with it
        # was refused as invalid JSON while its UTF-16 twin was read (fuzz round 19, C7)
        first = first.removeprefix(b"\xef\xbb\xbf")
        if first:
            yield first
        yield from chunks
        return
    decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
    yield decoder.decode(first).encode()
    for chunk in chunks:
        yield decoder.decode(chunk).encode()
    yield decoder.decode(b"", final=True).encode()


def _bomless_utf16(head: bytes) -> str | None:
    """'utf-16-le'/'utf-16-be' when the start is ASCII text with a NUL after (before) every
    character, as UTF-16 without a BOM reads; None otherwise."""
    sample = head[: min(len(head), 256) // 2 * 2]  # whole code units
    if len(sample) < 16:
        return None
    even, odd = sample[0::2], sample[1::2]
    if odd.count(0) == len(odd) and 0 not in even:
        return "utf-16-le"
    if even.count(0) == len(even) and 0 not in odd:
        return "utf-16-be"
    return None


def _chunks(
    path: str | os.PathLike[str],
    *,
    field: str,
    max_bytes: int,
    decompress: bool,
) -> Iterator[bytes]:
    raw = _raw_chunks(path, field)
    first = next(raw, b"")
    total = 0

    def capped(chunk: bytes) -> bytes:
        nonlocal total
        total += len(chunk)
        if total > max_bytes:
            raise ConfigError(
                f"{str(path)!r} holds more than {max_bytes / MIB:,.0f} MiB"
                + (" once decompressed" if gz else ""),
                field=field,
            )
        return chunk

    gz = decompress and first.startswith(_GZIP_MAGIC)
    if not gz:
        if first:
            yield capped(first)
        for chunk in raw:
            yield capped(chunk)
        return
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        for chunk in _chain(first, raw):
            data = inflater.decompress(chunk, _CHUNK)
            while True:
                if data:
                    yield capped(data)
                if not inflater.unconsumed_tail:
                    break
                data = inflater.decompress(inflater.unconsumed_tail, _CHUNK)
            if inflater.eof and inflater.unused_data.startswith(_GZIP_MAGIC):
                rest = inflater.unused_data
                inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
                data = inflater.decompress(rest, _CHUNK)
                if data:
                    yield capped(data)
        tail = inflater.flush()
        if tail:
            yield capped(tail)
        if not inflater.eof and total == 0:
            # the gzip magic, then nothing that inflates (a truncated copy read as empty)
            raise ConfigError(
                f"{str(path)!r} is not a valid gzip file (it ends before any data)", field=field
            )
    except zlib.error:
        raise ConfigError(f"{str(path)!r} is not a valid gzip file", field=field) from None


def _chain(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    yield first
    yield from rest


def read_bytes(
    path: str | os.PathLike[str],
    *,
    field: str,
    max_bytes: int = MAX_INPUT_BYTES,
    decompress: bool = True,
) -> bytes:
    """The whole (decompressed) content, at most `max_bytes`."""
    return b"".join(iter_chunks(path, field=field, max_bytes=max_bytes, decompress=decompress))


def iter_lines(
    path: str | os.PathLike[str],
    *,
    field: str,
    max_bytes: int = MAX_INPUT_BYTES,
    max_line_chars: int = MAX_LINE_CHARS,
    decompress: bool = True,
) -> Iterator[str]:
    """Text lines without their newline, streamed: UTF-8 with bad bytes and NULs replaced, each
    line cut at `max_line_chars`, memory bounded by one chunk plus one line.

    Universal newlines, as Python's text files: LF, CRLF and a lone CR each end a line wherever
    they occur (old Mac files; progress bars that redraw with CR). The line end was once chosen
    from the first chunk, so a log opening with 64 KiB of CR-only progress frames was split on
    CR throughout, its later lines merged (fuzz round 21, B3)."""
    pending = b""
    for chunk in iter_chunks(path, field=field, max_bytes=max_bytes, decompress=decompress):
        pending += chunk
        # a CR at the end of what has arrived may be the first half of a CRLF: keep it back
        held = pending.endswith(b"\r")
        if held:
            pending = pending[:-1]
        *lines, pending = pending.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        if held:
            pending += b"\r"
        for line in lines:
            yield _decode(line, max_line_chars)
        if len(pending) > 4 * max_line_chars:  # a very long line: keep only its head
            pending = pending[: 4 * max_line_chars]
    if pending:
        yield _decode(pending, max_line_chars)


def _decode(line: bytes, max_line_chars: int) -> str:
    text = line[: 4 * max_line_chars].decode("utf-8", errors="replace")
    return text.rstrip("\r").replace("\x00", "\ufffd")[:max_line_chars]


def read_text(
    path: str | os.PathLike[str],
    *,
    field: str,
    max_bytes: int = MAX_INPUT_BYTES,
    max_line_chars: int = MAX_LINE_CHARS,
    decompress: bool = True,
) -> str:
    """The whole text, line by line as `iter_lines` gives it, joined with newlines."""
    return "\n".join(
        iter_lines(
            path,
            field=field,
            max_bytes=max_bytes,
            max_line_chars=max_line_chars,
            decompress=decompress,
        )
    )


# --- outputs ------------------------------------------------------------------------------


def check_output(
    path: str | os.PathLike[str], *, field: str, formats: Sequence[str] | None = None
) -> Path:
    """`path` as a file bandwall may write: its folder exists and is writable, it is not a
    folder or a special file, and its suffix is one of `formats` (e.g. ``(".csv", ".json")``)
    when given. Nothing is created."""
    p = checked_path(path, field=field)
    if p.is_dir():
        raise ConfigError(f"{str(p)!r} is a folder; give a file name", field=field)
    if p.exists() and not p.is_file():
        raise ConfigError(f"{str(p)!r} is not a regular file (a device or pipe)", field=field)
    if formats is not None and p.suffix.lower() not in formats:
        known = ", ".join(formats)
        raise ConfigError(
            f"unknown format {p.suffix or '(no suffix)'!r} for {str(p)!r}; use one of: {known}",
            field=field,
        )
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise ConfigError(f"folder {str(parent)!r} does not exist", field=field)
    where = str(parent.resolve())
    if where == "/dev" or any(where == r or where.startswith(r + "/") for r in ("/proc", "/sys")):
        raise ConfigError(f"{str(p)!r} is in a system folder, not a place for files", field=field)
    if not os.access(parent, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise ConfigError(f"cannot write {str(p)!r}: permission denied", field=field)
    return p


@contextlib.contextmanager
def atomic_output(
    path: str | os.PathLike[str],
    *,
    field: str,
    formats: Sequence[str] | None = None,
    binary: bool = False,
) -> Iterator[IO[Any]]:
    """A file handle whose content replaces `path` only when the block completes; on any error
    the temporary file is removed and the target is left as it was."""
    p = check_output(path, field=field, formats=formats)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent or ".")
    try:
        with os.fdopen(fd, "wb" if binary else "w", newline=None if binary else "") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        if p.exists():
            with contextlib.suppress(OSError):
                os.chmod(tmp, stat.S_IMODE(p.stat().st_mode))
        else:
            os.chmod(tmp, 0o644)
        os.replace(tmp, p)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise ConfigError(f"cannot write {str(p)!r}: {exc.strerror}", field=field) from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_output(
    path: str | os.PathLike[str],
    data: str | bytes,
    *,
    field: str,
    formats: Sequence[str] | None = None,
) -> Path:
    """Write `data` to `path` atomically after checking the target (see `atomic_output`)."""
    with atomic_output(path, field=field, formats=formats, binary=isinstance(data, bytes)) as fh:
        fh.write(data)
    return Path(path)


def open_text_stream(
    path: str | os.PathLike[str], *, field: str, max_bytes: int = MAX_INPUT_BYTES
) -> io.StringIO:
    """A bounded in-memory text stream of the file, for parsers that want a file object (csv,
    json). Bounded by `max_bytes`, so never larger than the caller allowed."""
    return io.StringIO(read_text(path, field=field, max_bytes=max_bytes))


def is_gzip(path: str | os.PathLike[str]) -> bool:
    """Whether a regular file starts with the gzip magic (False for anything unreadable)."""
    try:
        with Path(path).open("rb") as fh:
            return fh.read(2) == _GZIP_MAGIC
    except OSError:
        return False


_ARCHIVES = (
    (b"BZh", "a bzip2 file: decompress it first (bunzip2), or gzip it"),
    (b"\xfd7zXZ\x00", "an xz file: decompress it first (unxz), or gzip it"),
    (b"PK\x03\x04", "a zip archive: unzip it and give its files or folder"),
    (b"\x28\xb5\x2f\xfd", "a zstd file: decompress it first (unzstd), or gzip it"),
)


def read_head(
    path: str | os.PathLike[str], size: int, *, field: str, decompress: bool = True
) -> bytes:
    """The first `size` bytes of the (decompressed) content, reading no further."""
    head = b""
    for chunk in iter_chunks(path, field=field, decompress=decompress):
        head += chunk
        if len(head) >= size:
            break
    return head[:size]


def archive_kind(path: str | os.PathLike[str], *, field: str) -> str | None:
    """What archive the file is, with what to do about it; None for anything else (a gzipped
    text file is read through; a gzipped tar is an archive). doctor and calibrate --from-log
    both ask: calibrate read a .tar.gz as text and fitted the lines between its headers (fuzz
    round 20, C7)."""
    head = read_head(path, 8, field=field, decompress=False)
    for magic, what in _ARCHIVES:
        if head.startswith(magic):
            return what
    # POSIX tar: 'ustar' at byte 257 of the first block
    if read_head(path, 512, field=field)[257:262] == b"ustar":
        return "a tar archive: extract it and give its folder"
    return None


__all__ = [
    "MAX_INPUT_BYTES",
    "MAX_LINE_CHARS",
    "archive_kind",
    "atomic_output",
    "check_input",
    "check_output",
    "is_gzip",
    "iter_chunks",
    "iter_lines",
    "open_text_stream",
    "read_bytes",
    "read_head",
    "read_text",
    "write_output",
]
