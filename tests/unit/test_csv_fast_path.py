"""The pyarrow CSV path against the `csv` module path it must equal.

Both paths open the same files; the profile (feature spec, class names), every
row (float32 bytes, NaN positions included; labels; categorical strings;
origin; its position in its file, which its split depends on) and every error
(type and message, with file, line and column) must be identical. The pyarrow path is also checked to really read these inputs, not
to hand them to the `csv` module.
"""

from __future__ import annotations

import gzip

import pytest

from kfdist.components.common.errors import InvalidInputError
import numpy as np

from kfdist.components.shard_dataset import csv_arrow, csv_reader
from kfdist.components.shard_dataset.csv_columns import MISSING_VALUES, ColumnLayout
from kfdist.components.shard_dataset.source import BATCH_SIZE, ReaderOptions


def write(path, text: str, compress: bool = False) -> str:
    data = text.encode("utf-8")
    if compress:
        with gzip.open(path, "wb") as f:
            f.write(data)
    else:
        path.write_bytes(data)
    return str(path)


def outcome(files, columnar: bool, label_column: str = "label"):
    """Everything a reader gives: the spec, then the rows of each file, or the error where it
    stops (the paths cut a file into batches differently)."""
    try:
        source = csv_reader.open_csv_source(files, ReaderOptions(label_column=label_column),
                                            columnar=columnar)
    except Exception as e:  # noqa: BLE001 - the error itself is compared
        return [("error", type(e).__name__, str(e))]
    out = [("spec", source.feature, source.class_names)]
    batches = []
    try:
        for b in source.batches():
            batches.append(b)
    except Exception as e:  # noqa: BLE001
        error = ("error", type(e).__name__, str(e))
    else:
        error = None
    for origin in dict.fromkeys(b.origin for b in batches):
        mine = [b for b in batches if b.origin == origin]
        inputs = np.concatenate([b.inputs for b in mine])
        labels = np.concatenate([b.labels for b in mine])
        strings = None if mine[0].categorical is None else np.concatenate(
            [b.categorical for b in mine])
        rows = [b.first_row + i for b in mine for i in range(len(b.labels))]
        out.append((origin, inputs.dtype.str, inputs.shape, inputs.tobytes(), labels.dtype.str,
                    labels.tolist(), rows, None if strings is None else (
                        strings.shape, strings.tolist(), {type(v) for v in strings.ravel()})))
    return out + ([error] if error else [])


def python_blocks(path: str, num_columns: int):
    return [(line, rows) for line, rows in csv_reader._iter_row_blocks(path, num_columns)]


def columnar_blocks(path: str, num_columns: int, piece_bytes=None):
    return [(int(chunk.lines[a]), chunk.rows(a, b))
            for chunk in csv_arrow.iter_row_chunks(path, num_columns, piece_bytes)
            for a, b in chunk.blocks]


def assert_same(files, label_column: str = "label"):
    want = outcome(files, columnar=False, label_column=label_column)
    assert outcome(files, columnar=True, label_column=label_column) == want
    return want


# ----------------------------------------------------------------------------- tricky inputs

MISSING = sorted(MISSING_VALUES)
TRICKY = {
    "quoted line breaks": 'x,s,label\n1.5,"a\nb",0\n2,"c\r\nd",1\n3,"e",0\n-4e2,plain,1\n',
    "blank lines and CRLF": "x,s,label\r\n1,a,0\r\n\r\n\r\n2,b,1\r\n3,c,0\r\n\r\n",
    "lone CR line ends": "x,s,label\r1,a,0\r\r2,b,1\r",
    "BOM": "\ufeffx,s,label\n1,a,0\n2,b,1\n",
    "no final line break": "x,s,label\n1,a,0\n2,b,1",
    "whitespace around values": "x,s,label\n 1.5 ,  a ,0\n\t2\t, b\u00a0, 1 \n3\u2003,\u2003c,0\n",
    "every missing token": "x,s,label\n" + "".join(
        f"{m if i % 2 else 1},{m if i % 3 else 'x'},{i % 2}\n"
        for i, m in enumerate(MISSING + [f" {m} " for m in MISSING])),
    "label names": "x,s,label\n1,a,cat\n2,b, dog\n3,c,bird \n4,d,\"cat\"\n",
    "quotes": 'x,s,label\n"1",""""," 0"\n"2","a""b",1\n3,"",0\n',
    "numbers": "x,y,label\n1e5,.5,0\n5.,+1,1\n-0,1e-50,0\n3.4028235e38,1234567890123456789012,1\n",
    "spellings Python reads alone":
        "x,s,label\n1_000,a,0\n\u0661\u0662,b,1\n-nan,c,01\n+nan,d,1_0\n",
    "strings only": "s,t,label\nred,S,0\nblue,,1\nNA,M,0\n",
    "non-ASCII": "x,s,label\n1,café,0\n2,日本,1\n3,\U0001f600,0\n",
    "class numbers not 0..k-1": "x,s,label\n1,a,-1\n2,b,3\n3,c,3.0\n4,d,99999999999999999999\n",
}


#: Cases only Python reads (numbers or missing tokens with whitespace, `1_000`, Arabic digits).
PYTHON_ONLY = {"whitespace around values", "every missing token", "spellings Python reads alone"}


def count_fallbacks(monkeypatch):
    """Counts the files whose profile the pyarrow path declined and the `csv` module reads."""
    calls = {"profile_declined": 0, "python_batches": 0}
    real_profile, real_batches = csv_arrow.profile_file, csv_reader._python_batches

    def profile(*args):
        read = real_profile(*args)
        calls["profile_declined"] += not read
        return read

    def batches(*args, **kwargs):
        calls["python_batches"] += 1
        return real_batches(*args, **kwargs)

    monkeypatch.setattr(csv_arrow, "profile_file", profile)
    monkeypatch.setattr(csv_reader, "_python_batches", batches)
    return calls


@pytest.mark.parametrize("case", list(TRICKY))
@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_tricky_tables_read_identically(case, compress, tmp_path, monkeypatch):
    path = write(tmp_path / ("t.csv.gz" if compress else "t.csv"), TRICKY[case], compress)
    want = outcome([path], columnar=False)
    assert want[0][0] == "spec" and len(want) > 1, want
    calls = count_fallbacks(monkeypatch)
    assert outcome([path], columnar=True) == want
    # pyarrow read them itself, except the spellings only Python reads.
    fell_back = case in PYTHON_ONLY
    assert calls == {"profile_declined": int(fell_back), "python_batches": int(fell_back)}


def test_rows_across_many_record_batches(tmp_path, monkeypatch):
    """Over 2 batches of rows, blank lines and line breaks in values, in tiny blocks."""
    lines = ["x,s,label"]
    for i in range(2 * BATCH_SIZE + 300):
        broken = i in (3, 1700)  # a value with a line break
        lines.append(f'{i * 0.25},"v\n{i % 7}",{i % 3}' if broken else f"{i},s{i % 5},{i % 3}")
        if i in (5, 2200):
            lines.append("")
    path = write(tmp_path / "long.csv", "\n".join(lines) + "\n")
    monkeypatch.setattr(csv_arrow, "BLOCK_BYTES", 700)
    want = outcome([path], columnar=False)
    assert len(want[1][5]) == 2 * BATCH_SIZE + 300
    calls = count_fallbacks(monkeypatch)
    assert outcome([path], columnar=True) == want
    source = csv_reader.open_csv_source([path], ReaderOptions())
    assert len(list(source.batches())) > 10  # many record batches, read by pyarrow
    assert calls == {"profile_declined": 0, "python_batches": 0}


def test_several_files_make_one_profile(tmp_path):
    files = [write(tmp_path / "a.csv", "x,s,label\n1,NA,cat\n,b,dog\n"),
             write(tmp_path / "b.csv", "x,s,label\nNA,c,cat\n2.5,d,bird\n", compress=True),
             write(tmp_path / "c.csv", "x,s,label\n3,,dog\n4,e,cat\n")]
    want = assert_same(files)
    assert want[0][2] == ("bird", "cat", "dog") and len(want) == 4


@pytest.mark.parametrize("text", [
    'x,s,label\n1,a"b,0\n',       # a quote inside an unquoted value
    'x,s,label\n1,"a"b,0\n',      # text after a closing quote
    'x,s,label\n1, "a",0\n',      # a space before an opening quote
    'x,s,label\n1,"a""",0\n2,"""b",1\n',  # doubled quotes at either end
    'x,s,label\n1,"a\n',          # a quote never closed
    "x,s,label\n1,a\x00,0\n",     # NUL
    "x,s,label\r" + "".join(f"{i},a,{i % 2}\r" for i in range(300)),  # CR line ends only
])
def test_odd_quotes_and_bytes_read_as_the_csv_module_reads_them(text, tmp_path):
    assert_same([write(tmp_path / "odd.csv", text)])


#: Cells of a numeric column pyarrow reads itself: numbers, missing tokens, quoted values.
NUMBER_CELLS = ["1", "-2.5", "3e2", ".5", "5.", "-0", "NA", "", "?", "null", '"7"', '""']
#: Cells of a string column pyarrow reads itself: quotes, separators, line breaks, `NA`.
STRING_CELLS = ["red", "NA", "", " pad ", '"x"', '"a,b"', '"l\nm"', '"""q"', 'a"b', "\u00e9"]
#: Cells only the `csv` module may judge: whitespace, `1_0`, infinities, bad numbers.
ODD_CELLS = ["1e39", "inf", "-nan", " ", " 7 ", "1_0", "0x1", "1.5e", "many"]


def _random_table(rng) -> str:
    """A numeric, a string and a label column of the cells above; now and then an odd cell, a
    row of the wrong width or a blank line."""
    lines = ["x,s,label"]
    for _ in range(int(rng.integers(1, 30))):
        cells = [NUMBER_CELLS[rng.integers(len(NUMBER_CELLS))] if rng.random() < 0.3
                 else f"{rng.normal():.3f}",
                 STRING_CELLS[rng.integers(len(STRING_CELLS))],
                 ["a", "b", " c", "0", "1"][rng.integers(5)]]
        if rng.random() < 0.03:
            cells[rng.integers(3)] = ODD_CELLS[rng.integers(len(ODD_CELLS))]
        if rng.random() < 0.02:
            cells = cells[:int(rng.integers(1, 3))] if rng.random() < 0.5 else cells + ["9"]
        lines.append(",".join(cells) + ("\n" if rng.random() < 0.05 else ""))
    return "\n".join(lines) + "\n"


def test_random_tables_read_identically(tmp_path, monkeypatch):
    """200 random small tables of tricky cells, with now and then a cell only Python reads, a
    row of the wrong width or a blank line: both paths give the same profile, rows and first
    error, and pyarrow reads at least half of the tables itself (else this would compare the
    `csv` module with itself)."""
    read_by_pyarrow = 0
    for seed in range(200):
        path = write(tmp_path / f"r{seed}.csv", _random_table(np.random.default_rng(seed)))
        want = outcome([path], columnar=False)
        calls = count_fallbacks(monkeypatch)
        assert outcome([path], columnar=True) == want, (seed, open(path).read())
        read_by_pyarrow += calls == {"profile_declined": 0, "python_batches": 0}
        monkeypatch.undo()
    assert read_by_pyarrow >= 100, read_by_pyarrow


# ----------------------------------------------------------------------------- errors


def _table(bad_row: str, rows: int = 1500) -> str:
    """A numeric, a string and a label column; `bad_row` replaces the row on line 1,200."""
    lines = ["x,s,label"] + [f"{i / 4},c{i % 3},{i % 2}" for i in range(rows)]
    lines[1199] = bad_row
    return "\n".join(lines) + "\n"


ERRORS = {
    "too few values": _table("1,a"),
    "too many values": _table("1,a,0,9"),
    "mixed column": _table("many,a,0"),
    "mixed column, string first": "x,s,label\n1,a,0\n2,3,1\n",
    "inf": _table("inf,a,0"),
    "-inf": _table("-inf,a,0"),
    "beyond float32": _table("1e39,a,0"),
    "beyond float64": _table("-1e400,a,0"),
    "not a number after whitespace": _table("\x1c7,a,0"),
    "missing label": _table("1,a,"),
    "missing label after whitespace": _table("1,a,  "),
    "label mixing numbers and text": _table("1,a,benign"),
    "label not a whole number": _table("1,a,0.5"),
    "only missing values": "x,s,label\nNA,a,0\n,b,1\n",
    "no rows": "x,s,label\n\n",
    "not UTF-8": "x,s,label\n1,a,0\n2,\udcff,1\n",
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_errors_are_identical(case, tmp_path):
    text = ERRORS[case]
    path = tmp_path / "bad.csv"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    want = assert_same([str(path)])
    assert want[-1][0] == "error", want[-1]


def test_too_many_classes_fail_as_in_the_python_path(tmp_path, monkeypatch):
    from kfdist.components.shard_dataset import csv_columns

    for module in (csv_columns, csv_arrow):
        monkeypatch.setattr(module, "MAX_NUM_CLASSES", 50)
    path = write(tmp_path / "t.csv", "x,label\n" + "".join(f"{i},c{i % 60}\n" for i in range(3000)))
    want = assert_same([path])
    assert "has over 50 distinct values" in want[-1][2]


def test_an_unknown_label_fails_as_in_the_python_path(tmp_path):
    """Labels are mapped with the profile's classes; one that is not among them (the file
    changed since) raises SourceChangedError naming the file and the label, in the same block."""
    from kfdist.components.shard_dataset.scan import SourceChangedError

    path = write(tmp_path / "t.csv", "".join(
        ["x,label\n"] + [f"{i},{'cat' if i != 1500 else 'emu'}\n" for i in range(2000)]))
    layout = ColumnLayout(columns=("x", "label"), label_index=1, numeric_index=[0],
                          categorical_index=[], label_to_id={"cat": 0}.__getitem__)

    def read(batches):
        out = []
        try:
            for b in batches:
                out.append((b.inputs.tobytes(), b.labels.tolist()))
        except SourceChangedError as e:
            out.append(("SourceChangedError", str(e)))
        return out

    want = read(csv_reader._parse_block(path, line, rows, layout, first_row=line - 2)
                for line, rows in csv_reader._iter_row_blocks(path, 2))
    assert want[-1][0] == "SourceChangedError" and len(want) == 2
    assert "t.csv" in want[-1][1] and "'emu'" in want[-1][1] and "run again" in want[-1][1]
    rows_then_error = (b"".join(r[0] for r in want[:-1]), sum((r[1] for r in want[:-1]), []),
                       want[-1])
    got = read(csv_reader._arrow_batches(path, layout, 2))
    assert (b"".join(r[0] for r in got[:-1]), sum((r[1] for r in got[:-1]), []), got[-1]
            ) == rows_then_error


def test_bad_csv_errors_name_the_line_and_column(tmp_path, monkeypatch):
    """The message the Python path gives for a value beyond float32 survives the pyarrow path."""
    path = write(tmp_path / "t.csv", _table("1e39,a,0"))
    calls = count_fallbacks(monkeypatch)
    with pytest.raises(InvalidInputError, match=r"line 1200, column 'x': value '1e39'"):
        list(csv_reader.open_csv_source([path], ReaderOptions()).batches())
    # pyarrow profiled the file; the `csv` module read it only from the batch with the value.
    assert calls == {"profile_declined": 0, "python_batches": 1}
