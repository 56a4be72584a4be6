"""Label and field selectors as the apiserver evaluates them (the common forms)."""

from __future__ import annotations

import re
from typing import Any, Dict, Mapping, Optional

_SET_TERM = re.compile(r"^\s*([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def _split_terms(selector: str):
    """Splits on commas that are not inside `in (...)` parentheses."""
    depth, term = 0, ""
    for char in selector:
        depth += char == "("
        depth -= char == ")"
        if char == "," and depth == 0:
            yield term
            term = ""
        else:
            term += char
    if term.strip():
        yield term


def labels_match(selector: Optional[str], labels: Mapping[str, str]) -> bool:
    """Whether `labels` satisfy a label selector (`a=b`, `a!=b`, `a`, `!a`, `a in (x,y)`)."""
    for term in _split_terms(selector or ""):
        term = term.strip()
        set_term = _SET_TERM.match(term)
        if set_term:
            key, op, values = set_term.groups()
            found = labels.get(key) in {v.strip() for v in values.split(",")}
            if found != (op == "in"):
                return False
        elif "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key.strip()) != value.strip():
                return False
        elif term.startswith("!"):
            if term[1:].strip() in labels:
                return False
        elif term not in labels:
            return False
    return True


def fields_match(selector: Optional[str], obj: Dict[str, Any]) -> bool:
    """Whether `obj` satisfies a field selector of `path=value` / `path!=value` terms."""
    for term in _split_terms(selector or ""):
        negate = "!=" in term
        path, value = term.replace("!=", "=").replace("==", "=").split("=", 1)
        actual: Any = obj
        for part in path.strip().split("."):
            actual = actual.get(part) if isinstance(actual, dict) else None
        if (str(actual) == value.strip()) == negate:
            return False
    return True
