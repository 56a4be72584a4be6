"""Counts as people write them: `1 epoch`, `2 epochs`, `1,438 examples`."""

from __future__ import annotations

from typing import Optional


def counted(count: float, noun: str, plural: Optional[str] = None) -> str:
    """`count` and `noun`, the noun plural unless the count is one.

    Args:
      count: How many (a whole float, as KFP metadata keeps numbers, counts as an integer).
      noun: The singular, e.g. `epoch`.
      plural: The plural when it is not `noun + "s"` (e.g. `anomalies`).

    Returns:
      E.g. `1 epoch`, `30 epochs`, `1,797 examples`.
    """
    number = int(count) if float(count).is_integer() else count
    return f"{number:,} {noun if number == 1 else plural or noun + 's'}"
