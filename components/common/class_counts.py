"""The label of a dataset described: its classes, their examples per split, and warnings.

The shard step counts each class's examples in each split
(`DatasetMetadata.class_counts`); `label_record` turns them into the record the
Dataset artifact's metadata and the run's `summary.json` carry, and
`label_lines` into the lines the shard log and the console print. Classes
under `RARE_CLASS_SHARE` of the examples (and under half an even share, so
that a hundred even classes are not all rare) are warned of in one line
(accuracy barely shows how they are predicted), and so is a class missing from
a split: one the train split lacks cannot be learnt, one the held-out split
lacks is never scored.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

from kfdist.components.common.dataset_spec import DatasetMetadata, display_class_names

#: A class with a smaller share of a dataset's examples is warned of.
RARE_CLASS_SHARE = 0.05
#: Classes a line names with their counts (the rest are counted).
NAMED_CLASSES = 10
TRAIN, HELD_OUT = "train", "eval"


def _warnings(classes: List[Dict[str, Any]]) -> List[str]:
    total = sum(c[TRAIN] + c[HELD_OUT] for c in classes)
    # Rare: under RARE_CLASS_SHARE, and under half an even share (100 even classes are not rare).
    bound = min(RARE_CLASS_SHARE, 0.5 / max(len(classes), 1))
    rare = [(c["name"], c[TRAIN] + c[HELD_OUT]) for c in classes
            if total and (c[TRAIN] + c[HELD_OUT]) / total < bound]
    out = []
    if rare:
        each = ", ".join(f"{name!r} {n:,} ({n / total:.1%})" for name, n in rare[:NAMED_CLASSES])
        more = f" and {len(rare) - NAMED_CLASSES} more" if len(rare) > NAMED_CLASSES else ""
        out.append(f"{len(rare)} class(es) under {bound:.1%} of the {total:,} examples: {each}"
                   f"{more}; accuracy barely shows how they are predicted: read their rows of "
                   "the confusion matrix")
    missing = {split: [c["name"] for c in classes if not c[split]] for split in (TRAIN, HELD_OUT)}
    if missing[TRAIN]:
        out.append(f"the train split has no example of class(es) {_names(missing[TRAIN])}: the "
                   "model cannot learn them")
    if missing[HELD_OUT]:
        out.append(f"the held-out split has no example of class(es) {_names(missing[HELD_OUT])}: "
                   "the evaluation never scores them (more data, or a larger eval_fraction)")
    return out


def _names(names: List[str]) -> str:
    shown = ", ".join(repr(n) for n in names[:NAMED_CLASSES])
    return shown + (f" and {len(names) - NAMED_CLASSES} more" if len(names) > NAMED_CLASSES else "")


def label_record(meta: DatasetMetadata) -> Optional[Dict[str, Any]]:
    """What a dataset's label holds: `column` (None: the source's folders name the classes),
    `classes` (per class, in class id order: its `name`, its `train` and `eval` examples) and
    `warnings` (one line each); None for a dataset written before classes were counted."""
    if meta.class_counts is None:
        return None
    names = display_class_names(meta)
    counts = {split: list(meta.class_counts.get(split, ())) for split in (TRAIN, HELD_OUT)}
    classes = [{"name": name, **{split: int(counts[split][i]) if i < len(counts[split]) else 0
                                 for split in (TRAIN, HELD_OUT)}}
               for i, name in enumerate(names)]
    return {"column": meta.label_column, "classes": classes, "warnings": _warnings(classes)}


def label_lines(record: Optional[Mapping[str, Any]]) -> List[str]:
    """The lines a person reads of a `label_record`: the classes with their examples, then
    each warning (`warning: ...`); none without a record."""
    if not record:
        return []
    classes = [(c["name"], int(c[TRAIN] + c[HELD_OUT]))  # KFP keeps numbers as floats
               for c in record["classes"]]
    total = sum(n for _, n in classes) or 1
    shown = [f"{name!r} {n:,} ({n / total:.0%})" for name, n in classes[:NAMED_CLASSES]]
    more = (f" and {len(classes) - NAMED_CLASSES} more" if len(classes) > NAMED_CLASSES else "")
    column = f"label {record['column']!r}" if record.get("column") else "label"
    return ([f"{column}: {len(classes)} classes: {', '.join(shown)}{more}"]
            + [f"warning: {w}" for w in record.get("warnings") or ()])
