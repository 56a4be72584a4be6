"""YAML for a person to read and edit: every object written out where it stands.

PyYAML writes an object met twice in one document once, as an anchor (`&id001`), and then
as an alias (`*id001`): a rendered job whose launcher and workers share one security context
would print it so. `kubectl` reads that, but a person cannot tell what the alias holds, and
editing the anchored copy silently changes the other. Every YAML document kfdist prints or
writes for a person goes through `to_yaml` or `to_yaml_all`.
"""

from __future__ import annotations

from typing import Any, Iterable

import yaml


class _WithoutAliases(yaml.SafeDumper):
    """`yaml.SafeDumper` that repeats an object instead of anchoring it."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def to_yaml(document: Any, **options: Any) -> str:
    """`document` as YAML without anchors or aliases.

    Args:
      document: Plain data (dicts, lists, strings, numbers, booleans, None).
      **options: `yaml.dump`'s options, e.g. `sort_keys=False`.
    """
    return yaml.dump(document, Dumper=_WithoutAliases, **options)


def to_yaml_all(documents: Iterable[Any], **options: Any) -> str:
    """`documents` as a YAML stream (`---` between them) without anchors or aliases."""
    return yaml.dump_all(documents, Dumper=_WithoutAliases, **options)
