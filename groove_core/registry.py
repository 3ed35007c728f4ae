"""Named knowledge bases: a user-level registry, and finding the KB a folder belongs to.

The registry is one JSON file, ``kbs.json``, in groove's folder of the platform's user
configuration (``$XDG_CONFIG_HOME/groove`` or ``~/.config/groove``; ``~/Library/Application
Support/groove`` on macOS; ``%APPDATA%\\groove`` on Windows), or in ``$GROOVE_CONFIG_HOME``
when set. It maps a name to a folder and a description, and is rewritten whole through a
temporary file and a rename, so a reader never sees half of it. A change (``kb add``,
``kb remove``) reads, edits and rewrites it while holding a lock on ``kbs.json.lock`` beside
it: two changes at once would otherwise each rewrite the file they read, and one would be
lost.

Light imports only (no index, no embedder): every ``--kb`` is resolved through this module.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from groove_core.config import CONFIG_FILENAME, DEFAULT_INDEX_DIR, INDEX_FILENAME, ConfigError
from groove_core.files import NotRegularFile, open_regular, read_regular

CONFIG_HOME_ENV = "GROOVE_CONFIG_HOME"
REGISTRY_FILENAME = "kbs.json"
LOCK_SUFFIX = ".lock"
#: How long a change waits for another one to finish: a change takes milliseconds, so a
#: lock held this long belongs to a process that hangs, and waiting on is no answer.
LOCK_WAIT_SECONDS = 10.0
#: A name is one word a shell and a JSON enum carry unquoted, never a path.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
MAX_DESCRIPTION_CHARS = 500


@dataclass(frozen=True)
class KbEntry:
    name: str
    path: Path
    description: str = ""

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "path": str(self.path), "description": self.description}


def config_home(environ: Mapping[str, str | None] | None = None) -> Path:
    """groove's folder of the user's configuration (see the module docstring), under
    ``environ`` (default: this process's; a server answering the command line asks
    which folder its client's environment means)."""
    env = os.environ if environ is None else environ
    home = Path(env.get("HOME") or Path.home())
    if override := env.get(CONFIG_HOME_ENV):
        return Path(override).expanduser()
    if sys.platform == "win32" and (appdata := env.get("APPDATA")):
        return Path(appdata) / "groove"
    if sys.platform == "darwin":
        return home / "Library" / "Application Support" / "groove"
    base = env.get("XDG_CONFIG_HOME") or str(home / ".config")
    return Path(base) / "groove"


def registry_path() -> Path:
    return config_home() / REGISTRY_FILENAME


def check_name(name: str) -> str:
    if not NAME.fullmatch(name):
        raise ConfigError(
            f"invalid knowledge base name {name!r}: use 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return name


#: A registry this large is not one groove wrote (500-character descriptions, 64-character
#: names): it is refused rather than read whole.
MAX_REGISTRY_BYTES = 64 * 1024 * 1024


def _read_registry(path: Path) -> str:
    """The registry's text. A FIFO there would otherwise block every command that reads the
    registry until something writes to it (groove_core.files)."""
    try:
        data = read_regular(path, MAX_REGISTRY_BYTES)
    except NotRegularFile as err:
        raise ConfigError(
            f"the registry of knowledge bases {path} is {err}: remove it, and "
            "'groove kb add' writes a new one"
        ) from None
    if len(data) > MAX_REGISTRY_BYTES:
        raise ConfigError(f"the registry of knowledge bases {path} is too large to be one")
    return data.decode("utf-8")


def load_registry() -> dict[str, KbEntry]:
    """Every registered KB by name; empty when there is no registry file yet."""
    path = registry_path()
    try:
        data = json.loads(_read_registry(path))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        # RecursionError: a file of nested brackets, which json parses by recursion.
        reason = "nested too deeply" if isinstance(err, RecursionError) else str(err)
        raise ConfigError(f"cannot read the registry of knowledge bases {path}: {reason}") from None
    kbs = data.get("kbs") if isinstance(data, dict) else None
    if not isinstance(kbs, dict):
        raise ConfigError(f"the registry of knowledge bases {path} has no 'kbs' table")
    out = {}
    for name, entry in kbs.items():
        if not (isinstance(entry, dict) and isinstance(entry.get("path"), str)):
            raise ConfigError(f"the registry {path}: entry {name!r} has no 'path'")
        # A hand-edited file is checked as `groove kb add` checks: names and descriptions
        # reach the MCP schema and the server's instructions.
        description = str(entry.get("description", ""))
        if len(description) > MAX_DESCRIPTION_CHARS:
            raise ConfigError(f"the registry {path}: the description of {name!r} is too long")
        out[check_name(name)] = KbEntry(name, Path(entry["path"]), description)
    return out


def save_registry(entries: dict[str, KbEntry]) -> Path:
    """Write the registry atomically: a temporary file beside it, then a rename."""
    path = registry_path()
    data = {
        "kbs": {
            name: {"path": str(e.path), "description": e.description}
            for name, e in sorted(entries.items())
        }
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".kbs.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(data, out, ensure_ascii=False, indent=2)
                out.write("\n")
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as err:
        raise ConfigError(f"cannot write the registry of knowledge bases {path}: {err}") from None
    return path


@contextmanager
def registry_lock() -> Iterator[None]:
    """Hold the registry's lock file for one read-modify-write, waiting at most
    :data:`LOCK_WAIT_SECONDS` for another change to finish. The lock file is left in place:
    removing it would let a third process lock a new file while the second holds the old."""
    path = registry_path()
    lock = path.with_name(path.name + LOCK_SUFFIX)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = open_regular(lock, os.O_RDWR | os.O_CREAT, 0o600)
    except NotRegularFile as err:
        raise ConfigError(f"cannot lock the registry of knowledge bases: {lock} is {err}") from None
    except OSError as err:
        raise ConfigError(f"cannot lock the registry of knowledge bases {lock}: {err}") from None
    try:
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        while not _try_lock(fd):
            if time.monotonic() > deadline:
                raise ConfigError(
                    f"the registry of knowledge bases is locked by another groove command "
                    f"({lock}, held for over {LOCK_WAIT_SECONDS:.0f} s); try again"
                )
            time.sleep(0.02)
        yield  # closing the descriptor below releases the lock
    finally:
        os.close(fd)


def _try_lock(fd: int) -> bool:
    """Take an exclusive lock on ``fd`` without waiting; False when another process has it."""
    if sys.platform == "win32":
        import msvcrt

        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def add_kb(name: str, folder: Path, description: str = "") -> KbEntry:
    check_name(name)
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise ConfigError(f"the description is longer than {MAX_DESCRIPTION_CHARS} characters")
    folder = folder.expanduser().resolve()
    if not folder.is_dir():
        raise ConfigError(f"{folder} does not exist or is not a folder")
    with registry_lock():
        entries = load_registry()
        if name in entries:
            raise ConfigError(
                f"a knowledge base named {name!r} is already registered "
                f"({entries[name].path}); run 'groove kb remove {name}' first"
            )
        entries[name] = KbEntry(name, folder, description)
        save_registry(entries)
    return entries[name]


def remove_kb(name: str) -> KbEntry:
    with registry_lock():
        entries = load_registry()
        if name not in entries:
            raise ConfigError(f"no knowledge base named {name!r} is registered{_known(entries)}")
        removed = entries.pop(name)
        save_registry(entries)
    return removed


def _known(entries: dict[str, KbEntry]) -> str:
    return f" (registered: {', '.join(sorted(entries))})" if entries else " (none are)"


def is_plain_name(value: str) -> bool:
    """A value ``--kb`` reads as a registered name: one word, no separator, no leading dot.

    ``./notes`` always means the folder, whatever is registered."""
    return bool(NAME.fullmatch(value)) and not value.startswith(".")


def has_index(folder: Path) -> bool:
    return (folder / DEFAULT_INDEX_DIR / INDEX_FILENAME).is_file()


def enclosing_kb(folder: Path) -> Path | None:
    """The nearest folder above ``folder`` (not itself) that holds an index, like git
    finds the repository above a subfolder; None when there is none."""
    here = folder.expanduser().resolve()
    for parent in here.parents:
        if has_index(parent):
            return parent
    return None


def resolve_kb(value: str | Path, *, discover: bool = True) -> Path:
    """The folder ``--kb VALUE`` means: a registered name, else a path. With ``discover``,
    a folder without an index of its own inside an indexed KB means that KB."""
    text = str(value)
    if is_plain_name(text):
        entries = load_registry()
        if text in entries:
            return entries[text].path
    folder = Path(text).expanduser()
    own = has_index(folder) or (folder / CONFIG_FILENAME).exists()
    if discover and folder.is_dir() and not own:
        found = enclosing_kb(folder)
        if found is not None:
            return found
    return folder


def kb_names(values: tuple[str, ...], every: bool) -> list[str]:
    """The registered names ``--all`` means (every one), or [] when not given."""
    if not every:
        return []
    if values:
        raise ConfigError("give either --kb or --all, not both")
    entries = load_registry()
    if not entries:
        raise ConfigError("--all: no knowledge base is registered (see 'groove kb add')")
    return sorted(entries)


def registered_entry(folder: Path) -> KbEntry | None:
    """The registry's entry for the KB in ``folder``, or None when it is not registered."""
    here = folder.expanduser().resolve()
    return next((e for e in load_registry().values() if e.path == here), None)
