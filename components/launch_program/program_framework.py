"""Which framework a user's program is written for, read from its imports (it is never run).

`kfdist launch` without `--framework` finds the program's entry file in its
command (`python train.py`, `python -m pkg.train`, `python -c CODE`,
`torchrun ... train.py`, `./train.py`; a directory stands for its
`__main__.py`; relative to `--program-dir` when one is given), parses it with
`ast`, and follows its imports of modules beside it. `import torch` means
PyTorch; `import tensorflow` (or Keras) means TensorFlow.
"""

from __future__ import annotations

import ast
import os
import re
import sys
from typing import Callable, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

from kfdist.components.common.errors import InvalidInputError
from kfdist.components.launch_program.program_job import PYTORCH, TENSORFLOW

#: Imported modules (a dotted prefix) that say a program's framework; the first match counts.
FRAMEWORK_MODULES = (("horovod.tensorflow", TENSORFLOW), ("horovod.keras", TENSORFLOW),
                     ("horovod.torch", PYTORCH), ("tensorflow", TENSORFLOW),
                     ("keras", TENSORFLOW), ("tf_keras", TENSORFLOW), ("torch", PYTORCH),
                     ("lightning", PYTORCH), ("pytorch_lightning", PYTORCH))
#: The most files of a program whose imports are read (the entry and modules beside it).
MAX_FILES = 50
_PYTHON = re.compile(r"python[0-9.]*$")
#: Interpreter options that take the next argument as their value.
_OPTIONS_WITH_VALUE = ("-W", "-X", "--check-hash-based-pycs")


class ProgramSource(NamedTuple):
    """A program file's text.

    Attributes:
      name: How messages name it (`train.py`, `the -c program`).
      text: Its source code.
      base: The directory its own modules are imported from.
      path: The file (None for `-c`).
    """

    name: str
    text: str
    base: str
    path: Optional[str] = None


def _framework_of(module: str) -> Optional[Tuple[str, str]]:
    """`(framework, the module of FRAMEWORK_MODULES that says so)` of an import, or None."""
    for prefix, framework in FRAMEWORK_MODULES:
        if module == prefix or module.startswith(prefix + "."):
            return framework, prefix
    return None


def _module_file(base: str, module: str) -> Optional[str]:
    """The file of `module` under `base` (`a/b.py`, `a/b/__init__.py`), or None."""
    path = os.path.join(base, *module.split("."))
    for candidate in (path + ".py", os.path.join(path, "__init__.py")):
        if os.path.isfile(candidate):
            return candidate
    return None


def _script(path: str, base: str) -> Optional[str]:
    """The file `python PATH` runs (a directory's `__main__.py`), relative to `base`."""
    path = os.path.join(base, path)
    if os.path.isdir(path):
        path = os.path.join(path, "__main__.py")
    return path if os.path.isfile(path) else None


def _is_python(executable: str) -> bool:
    return bool(_PYTHON.match(os.path.basename(executable)))


def entry_source(command: Sequence[str], program_dir: Optional[str] = None
                 ) -> Optional[ProgramSource]:
    """The program's entry file, or None when the command names none that is here.

    Args:
      command: The command every replica runs.
      program_dir: The directory the command runs in (`--program-dir`); default: here.
    """
    base = program_dir or os.curdir
    args = list(command)
    if args and _is_python(args[0]):
        rest = iter(args[1:])
        for arg in rest:
            if arg.startswith("-c"):
                code = arg[2:] or next(rest, "")
                return ProgramSource("the -c program", code, base)
            if arg.startswith("-m"):
                module = arg[2:] or next(rest, "")
                found = _module_file(base, module)
                main = os.path.join(base, *module.split("."), "__main__.py")
                path = main if os.path.isfile(main) else found
                return _read(path, base) if path else None
            if arg in _OPTIONS_WITH_VALUE:
                next(rest, None)
            elif not arg.startswith("-"):
                path = _script(arg, base)
                return _read(path, os.path.dirname(path)) if path else None
        return None
    scripts = (_script(arg, base) for arg in args if arg.endswith(".py"))
    path = next((found for found in scripts if found), None)
    return _read(path, os.path.dirname(path)) if path else None


def _read(path: str, base: str) -> Optional[ProgramSource]:
    try:
        with open(path, encoding="utf-8") as f:
            return ProgramSource(os.path.relpath(path, base), f.read(), base, path)
    except (OSError, UnicodeDecodeError):
        return None


def _imports(source: ProgramSource) -> Iterator[Tuple[str, str]]:
    """`(module, directory it is looked for in)` of every import in `source`, in order: an
    absolute one's in the program's directory, a relative one's beside `source` (none when
    it does not parse). `from a import b` names `a` and `a.b`."""
    try:
        tree = ast.parse(source.text)
    except (SyntaxError, ValueError):
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((alias.name, source.base) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = source.base
            if node.level:
                if source.path is None:
                    continue
                base = os.path.dirname(source.path)
                for _ in range(node.level - 1):
                    base = os.path.dirname(base)
            prefix = f"{node.module}." if node.module else ""
            if node.module:
                yield node.module, base
            yield from ((prefix + alias.name, base) for alias in node.names)


def imported_frameworks(command: Sequence[str], program_dir: Optional[str] = None
                        ) -> Tuple[Optional[str], Dict[str, str]]:
    """The frameworks the program imports, from its entry file and the modules beside it.

    Args:
      command: The command every replica runs.
      program_dir: The directory the command runs in (`--program-dir`); default: here.

    Returns:
      `(entry, found)`: the entry's name (None when the command names no Python file
      found here) and, by framework, what says so (`train.py imports torch`).
    """
    entry = entry_source(command, program_dir)
    if entry is None:
        return None, {}
    found: Dict[str, str] = {}
    pending: List[ProgramSource] = [entry]
    seen = {entry.path}
    while pending:
        source = pending.pop(0)
        for module, base in _imports(source):
            known = _framework_of(module)
            if known:
                found.setdefault(known[0], f"{source.name} imports {known[1]}")
                continue
            local = _module_file(base, module)
            if local and local not in seen and len(seen) < MAX_FILES:
                seen.add(local)
                read = _read(local, entry.base)
                pending.extend([read] if read else [])
    return entry.name, found


def choose_framework(command: Sequence[str], program_dir: Optional[str], default: str,
                     log: Optional[Callable[[str], None]] = None) -> str:
    """The framework the program imports, else `default`; the choice is logged with its reason.

    Args:
      command: The command every replica runs.
      program_dir: The directory the command runs in (`--program-dir`); None: here.
      default: The framework of a program that imports neither.
      log: Receives the line saying which framework and why; default: stderr.

    Raises:
      InvalidInputError: The program imports both frameworks.
    """
    entry, found = imported_frameworks(command, program_dir)
    if len(found) > 1:
        raise InvalidInputError(f"cannot tell the program's framework: "
                                f"{' and '.join(found.values())}; pass --framework "
                                f"{' or --framework '.join(found)}")
    if found:
        (framework, reason), = found.items()
    else:
        framework = default
        reason = (f"the default: {entry} imports neither tensorflow nor torch" if entry else
                  "the default: the command names no Python file found here")
    line = f"framework: {framework} ({reason}; --framework chooses)"
    if log is None:
        print(line, file=sys.stderr, flush=True)
    else:
        log(line)
    return framework
