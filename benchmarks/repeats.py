"""Pairs measured several times, the two sides alternating, reported as median and spread.

One run of each side says little on a shared machine: a noisy neighbour during one side's run
is enough to turn a ratio. So every pair runs `REPEATS` rounds, the sides alternating from
round to round (A B, B A, A B, ...) so that a slow stretch hurts both alike. Each round gives one
ratio; a figure is reported as its `spread` (median, min, max and the values), and a target is
met only when the whole spread meets it (`met`): a ratio whose spread crosses its target is not
met.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from benchmarks import journal

#: Rounds of every pair.
REPEATS = 3
#: The keys of a spread (`spread`).
SPREAD_KEYS = frozenset({"median", "min", "max", "values"})


def spread(values: Sequence[float], digits: int = 2) -> Dict[str, Any]:
    """`values` as their median, min, max and the values themselves, rounded to `digits`."""
    if not values:
        raise ValueError("a spread needs at least one value")
    return {"median": round(statistics.median(values), digits),
            "min": round(min(values), digits), "max": round(max(values), digits),
            "values": [round(v, digits) for v in values]}


def is_spread(value: Any) -> bool:
    """Whether `value` is a `spread`."""
    return isinstance(value, dict) and SPREAD_KEYS <= set(value)


def met(value: Any, ok: Callable[[Any], bool]) -> bool:
    """Whether `value` meets the target `ok`: for a spread, both its ends must (a spread that
    crosses the target is not met); for a single figure, the figure must."""
    if is_spread(value):
        return bool(ok(value["min"]) and ok(value["max"]))
    return bool(value is not None and ok(value))


def show(value: Any) -> str:
    """A figure as a table shows it: a spread as `median (min-max)`."""
    if is_spread(value):
        if value["min"] == value["max"]:
            return f"{value['median']}"
        return f"{value['median']} ({value['min']} to {value['max']})"
    return str(value)


def order(rounds: int, sides: int = 2) -> List[Tuple[int, int]]:
    """The `(round, side)` runs of `rounds` alternating rounds of `sides` sides: in order in
    even rounds, reversed in odd ones (A B, B A, A B, ...)."""
    runs = []
    for index in range(rounds):
        turn = range(sides) if index % 2 == 0 else reversed(range(sides))
        runs += [(index, side) for side in turn]
    return runs


def run_alternating(sides: Sequence[Callable[[int], Dict[str, Any]]], rounds: int = REPEATS,
                    log: Callable[[str], None] = lambda line: None,
                    pair: Optional[str] = None) -> List[List[Dict[str, Any]]]:
    """Runs every side `rounds` times in `order`; returns each side's results by round.

    Within `journal.recording`, each run is kept in the journal as it ends, and a run the
    journal already holds is taken from it instead of being made again.

    Args:
      sides: One function per side; each gets the round's index and returns its figures.
      rounds: How many rounds.
      log: Receives a line per run.
      pair: The pair's name within its measure, for the journal (None: not journaled).
    """
    results: List[List[Any]] = [[None] * rounds for _ in sides]
    recording = journal.active() if pair is not None else None
    for index, side in order(rounds, len(sides)):
        name = journal.Journal.name(recording[1], pair, index, side) if recording else None
        if recording and name in recording[0].runs:
            results[side][index] = recording[0].runs[name]["figures"]
            log(f"round {index + 1}/{rounds}, side {side + 1}/{len(sides)}: from the journal "
                f"(made {recording[0].runs[name]['ended']})")
            continue
        log(f"round {index + 1}/{rounds}, side {side + 1}/{len(sides)}")
        results[side][index] = sides[side](index)
        if recording:
            recording[0].add(name, results[side][index])
    return results


def best_times(fns: Dict[str, Callable[[], Any]], rounds: int = REPEATS) -> Dict[str, float]:
    """Each function's best wall time in seconds over `rounds` rounds, the functions taking
    turns within each round (for pairs quick enough that their best time is the figure)."""
    best = {name: float("inf") for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            started = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - started)
    return {name: round(seconds, 4) for name, seconds in best.items()}


def ratios(numerators: Sequence[float], denominators: Sequence[float]) -> Dict[str, Any]:
    """Each round's `numerator / denominator`, as a spread."""
    return spread([a / b for a, b in zip(numerators, denominators)])


def spreads_of(runs: Sequence[Dict[str, Any]], keys: Sequence[str],
               digits: int = 2) -> Dict[str, Any]:
    """`keys` of every run, each as a spread over the runs, rounded to `digits` (a key a run
    lacks, or holds None, is left out of that key's spread; a key no run holds is None)."""
    out: Dict[str, Any] = {}
    for key in keys:
        values = [run[key] for run in runs if run.get(key) is not None]
        out[key] = spread(values, digits) if values else None
    return out
