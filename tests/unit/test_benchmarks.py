"""The benchmark command works on a checkout, and its parsers read what kfp.local prints."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from benchmarks import end_to_end
from benchmarks.__main__ import target_rows

KFP_LOCAL_LOG = """\
11:55:37.378 - INFO - Executing task \x1b[96m'shard-dataset'\x1b[0m
11:55:41.915 - INFO - Task \x1b[96m'shard-dataset'\x1b[0m finished with status \x1b[92mSUCCESS\x1b[0m
11:55:41.917 - INFO - Executing task \x1b[96m'train-distributed'\x1b[0m
[worker-0] epoch 1/1: accuracy=0.5
11:55:47.854 - INFO - Task \x1b[96m'train-distributed'\x1b[0m finished with status \x1b[92mSUCCESS\x1b[0m
"""


def test_step_times_come_from_kfp_local_log_lines():
    assert end_to_end.step_seconds(KFP_LOCAL_LOG) == {"shard-dataset": 4.54,
                                                      "train-distributed": 5.94}


def test_an_epochs_wall_time_holds_its_steps_and_its_validation():
    from benchmarks.common import epoch_wall_seconds

    history = [{"seconds": 6.0, "validation_seconds": 0.5}, {"seconds": 4.0}]
    assert epoch_wall_seconds(history) == [6.5, 4.0]


def test_targets_are_judged_from_the_measures():
    rows = target_rows({"launcher": {"kfdist": {"reaction_seconds_max": 0.002}},
                        "end_to_end": {"kfdist_over_plain": 1.2,
                                       "kfdist_over_plain_without_fit_return": 2.5}})
    assert [(r["measure"], r["met"]) for r in rows] == [("launcher", True), ("end_to_end", False)]


def test_profile_stages_sort_functions_by_where_they_run():
    from benchmarks.sharding import stage_profile

    shares = stage_profile([("~:<method 'decompress' of 'zlib.Decompress' objects>", 3.0),
                            ("/x/shard_dataset/scan.py:example_keys", 1.0),
                            ("/x/shard_dataset/writer.py:push", 2.0),
                            ("/x/common/tfrecord_framing.py:frame", 1.0),
                            ("/x/somewhere.py:elsewhere", 1.0)])
    assert shares["read and decompress the source"] == 0.375
    assert shares["split: a content hash per example"] == 0.125
    assert shares["shuffle and balance the shards"] == 0.25
    assert shares["TFRecord framing and CRC-32C"] == 0.125
    assert shares["other"] == 0.125
    assert abs(sum(shares.values()) - 1.0) < 1e-9


def test_time_to_accuracy_counts_start_up_and_the_epochs_up_to_the_target():
    from benchmarks.time_to_accuracy import time_to_target

    epochs = [{"seconds": 5.0, "validation_seconds": 1.0, "val_accuracy": 0.95},
              {"seconds": 4.0, "validation_seconds": 1.0, "val_accuracy": 0.981},
              {"seconds": 4.0, "validation_seconds": 1.0, "val_accuracy": 0.99}]
    assert time_to_target(epochs, 26.0, 0.98) == {
        "startup_seconds": 10.0, "epochs_to_target": 2, "seconds_to_target": 21.0}
    assert time_to_target(epochs, 26.0, 0.995)["seconds_to_target"] is None


def test_the_mirrored_time_to_accuracy_comes_from_the_end_to_end_training_step():
    from benchmarks.time_to_accuracy import _row_of_end_to_end

    run = {"kfdist_steps": {"train-distributed": 20.0},
           "kfdist_train_history": [
               {"seconds": 5.0, "validation_seconds": 1.0, "val_accuracy": 0.97},
               {"seconds": 4.0, "validation_seconds": 1.0, "val_accuracy": 0.98}]}
    row = _row_of_end_to_end(run, 1100, 1, 0.96)
    # Start-up: the step's 20 s less both epochs' 11 s; the target is reached after the first.
    assert (row["startup_seconds"], row["epochs_to_target"], row["seconds_to_target"]) == (9.0, 1, 15.0)
    assert row["val_accuracy"] == [0.97] and row["examples_per_second"] == 200
    assert _row_of_end_to_end(run, 1100, 1, 0.975)["seconds_to_target"] is None


def test_the_sharding_benchmark_compares_every_writer_on_generated_data(tmp_path):
    done = subprocess.run([sys.executable, "-m", "benchmarks", "--quick", "--only", "sharding",
                           "--out-dir", str(tmp_path)], capture_output=True, text=True, timeout=600,
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert done.returncode == 0, done.stderr[-3000:]
    sharding = json.loads((tmp_path / "results-quick.json").read_text())["measures"]["sharding"]
    expected = {"1x": sharding["mnist"]["examples_1x"], "10x": 10 * sharding["mnist"]["examples_1x"],
                "csv": sharding["csv"]["rows"]}
    for tag, figures in (("1x", sharding["mnist"]["1x"]), ("10x", sharding["mnist"]["10x"]),
                         ("csv", sharding["csv"])):
        # Every writer wrote every example, and the local and Beam datasets are the same size.
        assert [figures[w]["examples"] for w in ("local", "beam", "naive_writer")] == [expected[tag]] * 3
        assert figures["local"]["output_bytes"] == figures["beam"]["output_bytes"] > 0
        assert figures["naive_writer"]["examples_per_second"] > 0
        assert figures["copy_limit"]["mb_per_second"] > 0
    assert sharding["mnist"]["10x"]["local"]["seconds"] > 0
    assert abs(sum(sharding["csv"]["local_profile"]["stages"].values()) - 1) < 0.01
    assert sharding["csv"]["local_profile"]["stages"]["read and decompress the source"] > 0
    text = (tmp_path / "results-quick.md").read_text()
    assert "| MNIST 10x |" in text and "byte-copy limit" in text


def test_generated_digits_are_distinct_with_a_clean_background(tmp_path):
    import gzip

    import numpy as np

    from benchmarks.common import write_synthetic_mnist
    from kfdist.sample_data import digits_as_mnist

    write_synthetic_mnist(str(tmp_path), 20_000, seed=5)
    with gzip.open(tmp_path / "train-images-idx3-ubyte.gz") as f:
        images = np.frombuffer(f.read()[16:], np.uint8).reshape(-1, 28, 28)
    with gzip.open(tmp_path / "train-labels-idx1-ubyte.gz") as f:
        labels = np.frombuffer(f.read()[8:], np.uint8)
    assert images.shape == (20_000, 28, 28) and labels.shape == (20_000,)
    assert len({image.tobytes() for image in images}) == 20_000
    # Noise only on ink: the corners (never ink, even shifted by 2) stay 0, as in scans.
    assert not images[:, :2, :2].any() and images.max() > 200
    # Each example is a sample digit, shifted, plus noise 0-7 on its ink, and has its label.
    samples, sample_labels = digits_as_mnist()
    samples = np.minimum(samples, 248).astype(np.int16)
    for index in (0, 777, 19_999):
        image = images[index].astype(np.int16)
        close = set()
        for dy in range(-2, 3):
            for dx in range(-2, 3):
                noise = image - np.roll(samples, (dy, dx), axis=(1, 2))
                fits = ((noise >= 0) & (noise < 8)).all(axis=(1, 2))
                close.update(sample_labels[fits].tolist())
        assert close == {labels[index]}


def test_the_generated_table_has_distinct_rows_of_every_column(tmp_path):
    import csv

    from benchmarks.common import CSV_NUMERIC_COLUMNS, write_synthetic_csv

    table = write_synthetic_csv(str(tmp_path), 3_000_000, parts=2, seed=1)
    files = sorted(tmp_path.iterdir())
    assert [f.name for f in files] == ["table-00000-of-00002.csv", "table-00001-of-00002.csv"]
    assert table["bytes"] == sum(f.stat().st_size for f in files) >= 3_000_000
    rows = [row for f in files for row in list(csv.reader(f.open()))[1:]]
    assert len(rows) == table["rows"]
    assert {len(row) for row in rows} == {CSV_NUMERIC_COLUMNS + 4}
    assert [int(row[0]) for row in rows] == list(range(len(rows)))
    missing = sum(cell == "" for row in rows for cell in row[1:-3]) / (len(rows) * CSV_NUMERIC_COLUMNS)
    assert 0.01 < missing < 0.03


def test_the_library_paths_produce_what_kfdist_writes_and_reads(tmp_path):
    """Each hand-written part and its library path give the same bytes, records and rows."""
    import tensorflow as tf

    from benchmarks import library_paths

    encoding = library_paths.measure_encoding(tf, 300)  # asserts the bytes are equal
    assert encoding["images_kfdist_over_proto"] > 0 and encoding["rows_kfdist_over_proto"] > 0
    records = [b"record %d" % i * (i % 7 + 1) for i in range(300)]
    framing = library_paths.measure_framing(tf, records, str(tmp_path))
    assert framing["none"]["same_records"] and framing["gzip"]["same_records"]
    import numpy as np

    from kfdist.components.shard_dataset.example_encoding import CanonicalExampleEncoder

    rng = np.random.default_rng(0)
    rows = CanonicalExampleEncoder("features", 4 * 120).encode(
        rng.normal(size=(301, 120)).astype(np.float32), rng.integers(0, 10, 301),
        rng.choice(np.array(["S", "M", "L", ""]), (301, 2)))
    columns = library_paths.measure_column_read(tf, rows, str(tmp_path))
    assert columns["same_values"] and columns["examples"] == 301
    csv = library_paths.measure_csv(300_000, str(tmp_path))  # asserts equal row counts
    assert csv["rows"] > 100 and set(csv["seconds"]) == {
        "kfdist", "kfdist_read_pass", "kfdist_csv_module", "pyarrow_open_csv", "pandas_chunks"}


def test_an_only_run_keeps_the_other_measures_with_their_own_headers():
    """A partial run writes its measures' headers and never another measure's."""
    from benchmarks import provenance

    day1 = {"commit": "a" * 40, "command": "python -m benchmarks", "date": "day 1",
            "machine": {"cpus": 2}}
    earlier = {"mode": "full", "measures": {"sharding": {"a": 1}, "library_paths": {"b": 2}},
               "headers": {"sharding": day1, "library_paths": day1}}
    day2 = dict(day1, commit="b" * 40, command="python -m benchmarks --only library_paths",
                date="day 2")
    result = {"mode": "full", "measures": {"library_paths": {"b": 3}},
              "headers": {"library_paths": day2}}
    provenance.keep_earlier(result, json.loads(json.dumps(earlier)))
    assert result["measures"] == {"library_paths": {"b": 3}, "sharding": {"a": 1}}
    assert result["headers"] == {"library_paths": day2, "sharding": day1}
    quick = {"mode": "quick", "measures": {}, "headers": {}}
    provenance.keep_earlier(quick, earlier)
    assert quick == {"mode": "quick", "measures": {}, "headers": {}}  # never another mode's
    # A results.json from before headers: each measure keeps its own date, and no commit.
    legacy = {"mode": "full", "date": "day 0", "machine": {"cpus": 2},
              "measures": {"sharding": {"a": 1}}, "measured": {"sharding": "day -1"}}
    fresh = {"mode": "full", "measures": {}, "headers": {}}
    provenance.keep_earlier(fresh, legacy)
    assert fresh["headers"]["sharding"] == {"commit": None, "command": None, "date": "day -1",
                                            "machine": {"cpus": 2}}


def test_a_header_names_the_checkouts_commit_the_command_and_the_machine():
    from benchmarks import provenance
    from benchmarks.common import REPO_ROOT

    header = provenance.header("python -m benchmarks --peers")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                          text=True, check=True).stdout.strip()
    assert header["commit"].split("+")[0] == head and header["commit"] in (head, head + "+dirty")
    assert header["command"] == "python -m benchmarks --peers"
    assert header["machine"]["cpus"] == os.cpu_count() and header["date"].endswith("UTC")


def test_a_spread_is_the_median_and_range_and_a_target_needs_all_of_it():
    from benchmarks import repeats

    ratio = repeats.ratios([1.0, 2.0, 0.9], [1.0, 2.0, 1.0])
    assert ratio == {"median": 1.0, "min": 0.9, "max": 1.0, "values": [1.0, 1.0, 0.9]}
    at_least = lambda v: v >= 0.95  # noqa: E731
    assert not repeats.met(ratio, at_least)  # the median meets it, the spread crosses it
    assert repeats.met(repeats.spread([0.96, 1.2, 1.0]), at_least)
    within = lambda v: abs(v) <= 0.01  # noqa: E731
    assert not repeats.met(repeats.spread([-0.02, 0.0, 0.005], 4), within)
    assert repeats.met(repeats.spread([-0.01, 0.0, 0.005], 4), within)
    assert repeats.met(1.0, at_least) and not repeats.met(None, at_least)
    assert repeats.show(ratio) == "1.0 (0.9 to 1.0)" and repeats.show(2.5) == "2.5"
    assert repeats.spreads_of([{"s": 2.0}, {"s": None}, {"s": 4.0}], ["s", "t"]) == {
        "s": {"median": 3.0, "min": 2.0, "max": 4.0, "values": [2.0, 4.0]}, "t": None}


def test_the_sides_of_a_pair_alternate_from_round_to_round():
    from benchmarks import repeats

    calls = []
    runs = repeats.run_alternating([lambda i: calls.append(("A", i)) or {"a": i},
                                    lambda i: calls.append(("B", i)) or {"b": i}], 3)
    assert calls == [("A", 0), ("B", 0), ("B", 1), ("A", 1), ("A", 2), ("B", 2)]
    assert runs == [[{"a": 0}, {"a": 1}, {"a": 2}], [{"b": 0}, {"b": 1}, {"b": 2}]]
    assert repeats.order(2, 3) == [(0, 0), (0, 1), (0, 2), (1, 2), (1, 1), (1, 0)]


def test_a_target_measured_in_rounds_is_met_only_by_its_whole_spread():
    ratio = {"median": 1.0, "min": 0.9, "max": 1.1, "values": [0.9, 1.0, 1.1]}
    figures = {"rounds": 3, "multi_worker_mirrored": {"matched": {
        "kfdist_steps_per_second_over_plain": ratio}}, "parameter_server": {"matched": {
            "kfdist_steps_per_second_over_plain": dict(ratio, min=0.97)}}}
    rows = target_rows({"peers_distributed": figures})
    assert [r["met"] for r in rows] == [False, True]
    assert rows[0]["value"] == ratio
    # Figures kept from a run before rounds are not read as if they were current.
    old = target_rows({"peers_distributed": {"multi_worker_mirrored": {
        "kfdist_steps_per_second_over_plain": 1.37}}})
    assert {r["value"] for r in old} == {None} and not any(r["met"] for r in old)


def test_pss_comes_from_the_processes_own_smaps_rollup():
    """Parsed from the real file of this process: at least its touched memory, at most its RSS."""
    from benchmarks import peers

    block = bytearray(64 * 2 ** 20)
    block[::4096] = b"x" * len(block[::4096])  # touched: resident and private
    with open(f"/proc/{os.getpid()}/smaps_rollup") as f:
        text = f.read()
    pss_kib = peers.parse_pss_kib(text)
    rss_kib = next(int(line.split()[1]) for line in text.splitlines() if line.startswith("Rss:"))
    assert 64 * 1024 <= pss_kib <= rss_kib
    assert abs(peers.process_pss_bytes(os.getpid()) / 1024 - pss_kib) < 16 * 1024
    import pytest

    with pytest.raises(ValueError):
        peers.parse_pss_kib("Rss: 10 kB\n")
    del block


def test_a_peer_programs_memory_counts_its_whole_process_tree():
    """Beam's workers are child processes: the peak is summed over the tree, not the parent's."""
    from benchmarks import peers

    child = ("import time; b = bytearray(300 * 2**20); b[::4096] = b'x' * len(b[::4096]); "
             "time.sleep(1.5)")
    parent = ("import json, subprocess, sys; subprocess.run([sys.executable, '-c', sys.argv[1]], "
              "check=True); print(json.dumps({'done': True}))")
    result = peers.run_tree([sys.executable, "-c", parent, child])
    assert result["done"] is True and result["wall_seconds"] >= 1.5
    assert result["peak_tree_pss_mb"] >= 300
    assert result["pipeline_seconds"] == result["wall_seconds"]  # it printed no pipeline end


def test_a_programs_pipeline_clock_stops_where_it_says_its_pipeline_ended():
    """Checks after the pipeline (here a 1.5 s sleep) stay outside `pipeline_seconds`."""
    from benchmarks import peers

    program = ("import json, time; time.sleep(0.5); done = time.time(); time.sleep(1.5); "
               "print(json.dumps({'pipeline_done_unix': done}))")
    result = peers.run_tree([sys.executable, "-c", program])
    assert 0.5 <= result["pipeline_seconds"] <= result["wall_seconds"] - 1.4
    assert "pipeline_done_unix" not in result


def test_the_penguin_splits_are_the_same_rows_for_both_pipelines(tmp_path):
    """kfdist reads the table as it is; the peer's copy has the NA cells empty, nothing else."""
    import csv

    from benchmarks.peer_end_to_end import write_splits

    paths = write_splits(str(tmp_path))
    assert paths["rows"] == {"train": 275, "eval": 69}
    for split in ("train", "eval"):
        with open(os.path.join(paths["kfdist"], split, f"{split}.csv"), newline="") as f:
            ours = list(csv.reader(f))
        with open(paths[f"tfx_{split}"], newline="") as f:
            theirs = list(csv.reader(f))
        assert [["" if c == "NA" else c for c in r] for r in ours] == theirs
        assert any("NA" in r for r in ours) and not any("NA" in r for r in theirs)


def test_the_table_at_size_is_split_alike_and_both_pipelines_leave_out_its_id(tmp_path):
    """Every fifth row held out, the same rows and cells for both; the `id` reaches both files
    and each pipeline is told to leave it out, with the same label and settings."""
    import csv

    from benchmarks import peer_at_size
    from benchmarks.peer_end_to_end import kfdist_command, tfx_command

    paths = peer_at_size.write_table(str(tmp_path), 40)
    assert paths["rows"] == {"train": 32, "eval": 8}
    ids, size = {}, 0
    for split in ("train", "eval"):
        ours_path = os.path.join(paths["kfdist"], split, f"{split}.csv")
        with open(ours_path, newline="") as f:
            ours = list(csv.reader(f))
        with open(paths[f"tfx_{split}"], newline="") as f:
            assert list(csv.reader(f)) == ours  # its missing cells are empty already
        assert ours[0][0] == "id" and ours[0][-1] == "label" and any("" in r for r in ours)
        ids[split] = [int(r[0]) for r in ours[1:]]
        size += os.path.getsize(ours_path)
    assert ids["eval"] == list(range(0, 40, 5))
    assert sorted(ids["train"] + ids["eval"]) == list(range(40))
    assert paths["row"]["id"] == "0" and paths["bytes"] == size

    args = (peer_at_size.SETTINGS, peer_at_size.LABEL, peer_at_size.EXCLUDE)
    ours = kfdist_command(paths["kfdist"], "run", *args)
    theirs = tfx_command("python", paths, "tfx-run", *args)
    assert ours[ours.index("--exclude-columns") + 1] == theirs[theirs.index("--drop") + 1] == "id"
    for mine, peer in (("--label-column", "--label"), ("--epochs", "--epochs"),
                       ("--batch-size", "--batch-size"), ("--learning-rate", "--learning-rate"),
                       ("--accuracy-threshold", "--threshold")):
        assert ours[ours.index(mine) + 1] == theirs[theirs.index(peer) + 1]


def test_pages_two_processes_share_count_once_in_a_trees_memory():
    """200 MB shared by a parent and its forked child: summed RSS would say 400, PSS says 200."""
    from benchmarks import peers

    program = ("import json, mmap, os, time; m = mmap.mmap(-1, 200 * 2**20)\n"
               "for _ in range(200): m.write(b'x' * 2**20)\n"
               "pid = os.fork()\n"
               "if pid == 0:\n    m[::4096]; time.sleep(1.5); os._exit(0)\n"
               "os.waitpid(pid, 0); print(json.dumps({'done': True}))")
    result = peers.run_tree([sys.executable, "-c", program])
    assert 190 <= result["peak_tree_pss_mb"] <= 300


def _run(steps_per_second, accuracy, start=100.0):
    """A run as the distributed benchmark records one: two epochs of 50 steps."""
    seconds = 50 / steps_per_second
    return {"epochs": [{"seconds": seconds + 1, "validation_seconds": 0.5, "val_accuracy": 0.5},
                       {"seconds": seconds, "validation_seconds": 0.5,
                        "val_accuracy": accuracy}],
            "started_unix": start, "first_epoch_begin_unix": start + 10.0,
            "last_epoch_end_unix": start + 10.0 + 2 * seconds + 2.0,
            "ended_unix": start + 10.0 + 2 * seconds + 5.0}


def test_distributed_figures_count_start_up_to_the_first_step_and_the_exit_apart():
    from benchmarks.peer_distributed import figures

    f = figures(_run(10.0, 0.9), steps=50, examples_per_step=128, target=0.8)
    assert f["steps_per_second"] == 10.0 and f["examples_per_second"] == 1280
    assert f["startup_seconds"] == 10.0 and f["exit_seconds"] == 3.0
    # The target is reached in epoch 2: start-up, both epochs and their validation.
    assert f["epochs_to_target"] == 2 and f["seconds_to_target"] == 10.0 + 6.5 + 5.5
    assert figures(_run(10.0, 0.7), 50, 128, 0.8)["seconds_to_target"] is None


def test_the_peer_tables_are_generated_from_results_json(tmp_path):
    """The snippet the documentation includes holds each measure's commit and command, the
    targets as median and range (a crossing spread not met), and the pairs' figures."""
    from benchmarks import peer_report, report
    from benchmarks.common import REPO_ROOT
    from benchmarks.peer_distributed import CONTROLLED, PAIRS, figures, pair_result, with_control

    measure = {"train_examples": 6400, "epochs": 2, "target_accuracy": 0.8,
               "batch_per_replica": 64, "rounds": 3}
    for strategy, speeds in (("multi_worker_mirrored", ((9.6, 10.0, 10.4), (10.0, 10.0, 10.0))),
                             ("parameter_server", ((10.0, 10.2, 10.4), (10.0, 10.0, 10.0)))):
        measure[strategy] = {}
        for pair in PAIRS:
            ours, plain = PAIRS[pair](strategy)
            measure[strategy][pair] = pair_result(
                50, 128, ours, plain, [figures(_run(v, 0.9), 50, 128, 0.8) for v in speeds[0]],
                [figures(_run(v, 0.9), 50, 128, 0.8) for v in speeds[1]])
            if pair in CONTROLLED:
                measure[strategy][pair] = with_control(measure[strategy][pair], [
                    figures(_run(v, 0.9), 50, 128, 0.8) for v in (11.0, 10.0, 9.0)])
    header = {"commit": "0123456789abcdef" * 2 + "01234567", "command": "python -m benchmarks "
              "--peers", "date": "2026-11-27 01:00 UTC", "machine": {"cpus": 2, "cpu_model": "x",
                                                                     "memory_gib": 8}}
    result = {"mode": "full", "command": header["command"], "date": header["date"],
              "seconds": 1, "measures": {"peers_distributed": measure},
              "headers": {"peers_distributed": header}}
    result["targets"] = target_rows(result["measures"])
    (tmp_path / "results.json").write_text(json.dumps(result))
    subprocess.run([sys.executable, "-m", "benchmarks.peer_report",
                    str(tmp_path / "results.json")], check=True, cwd=REPO_ROOT)
    text = (tmp_path / peer_report.SNIPPET).read_text()
    assert text == peer_report.snippet(json.loads(json.dumps(result)))
    assert text == peer_report.snippet_of_file(str(tmp_path / "results.json"))
    assert "`0123456789ab`" in text and "`python -m benchmarks --peers`" in text
    mirrored = next(line for line in text.splitlines() if "multi_worker_mirrored (2 workers)"
                    in line)
    assert "| 1.0 (0.96 to 1.04) | >= 0.95x | yes |" in mirrored
    assert "| 1.02 (1.0 to 1.04) | >= 0.95x | yes |" in next(
        line for line in text.splitlines() if "parameter_server (1 ps" in line)
    measure["multi_worker_mirrored"]["matched"]["kfdist_steps_per_second_over_plain"]["min"] = 0.9
    result["targets"] = target_rows(result["measures"])
    assert "| 1.0 (0.9 to 1.04) | >= 0.95x | **no** |" in peer_report.snippet(result)
    assert "| multi_worker_mirrored | matched | kfdist | 1 | in memory" in text
    assert "| parameter_server | defaults | plain | 10 | TFRecords, parsed per batch |" in text
    assert "| 10.0 (9.6 to 10.4) | 10.0 | 3.0 |" in text  # steps/s, start-up, exit
    assert report.markdown(result).count("## Distributed") == 1
    noise = [line for line in text.splitlines() if "| plain / plain again" in line]
    assert len(noise) == 2 and all("| 1.0 (0.91 to 1.11) |" in line for line in noise)


def test_a_measure_that_does_not_exist_is_refused_in_one_line(tmp_path, capsys):
    from benchmarks.__main__ import main

    assert main(["--only", "peers_sharding,nope", "--out-dir", str(tmp_path)]) == 2
    assert main(["--peers", "--rounds", "0", "--out-dir", str(tmp_path)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("python -m benchmarks: --only nope: not a measure; valid: ")
    assert lines[1] == "python -m benchmarks: --rounds 0: must be at least 1"
    assert len(lines) == 2 and not list(tmp_path.iterdir())  # nothing written


def test_a_run_whose_output_lacks_rows_is_run_again_and_not_counted():
    from benchmarks.peer_sharding import complete_run

    written = iter([1_029_696, 1_122_068])
    lines = []
    result = complete_run("tfx", lambda: {"examples": next(written), "pipeline_seconds": 450.0},
                          1_122_068, lines.append)
    assert result["examples"] == 1_122_068
    assert result["rejected_runs"] == [{"examples": 1_029_696, "pipeline_seconds": 450.0}]
    assert lines == ["tfx wrote 1029696 of 1122068 rows: not counted, run again"]
    with pytest.raises(RuntimeError, match="fewer than the table's 10 rows in 2 runs: \\[9, 9\\]"):
        complete_run("tfx", lambda: {"examples": 9}, 10, lines.append, attempts=2)


def test_a_stopped_run_resumes_with_the_runs_its_journal_kept(tmp_path):
    """Each run is journaled as it ends; `--resume` makes only the runs that are missing."""
    from benchmarks import journal, repeats

    made = []

    def side(name, fail_at=None):
        def run(index):
            if (name, index) == fail_at:
                raise KeyboardInterrupt  # stopped midway, as by Ctrl-C
            made.append((name, index))
            return {"side": name, "round": index}
        return run

    key = {"code": "c" * 40, "mode": "full", "machine": {"cpus": 2}}  # committed code
    first = journal.open_journal(str(tmp_path), "full", resume=False, key=key)
    with pytest.raises(KeyboardInterrupt), journal.recording(first, "peers_at_size"):
        repeats.run_alternating([side("kfdist"), side("tfx", fail_at=("tfx", 1))], 3,
                                pair="at-size")
    assert made == [("kfdist", 0), ("tfx", 0)]
    saved = json.loads((tmp_path / "journal-full.json").read_text())
    assert sorted(saved["runs"]) == ["peers_at_size/at-size/1/1", "peers_at_size/at-size/1/2"]

    made.clear()
    lines = []
    again = journal.open_journal(str(tmp_path), "full", resume=True, key=key)
    dirty = dict(key, code=key["code"] + "+dirty")  # runs of uncommitted code never resume
    (tmp_path / "dirty").mkdir()
    journal.Journal(str(tmp_path / "dirty" / "journal-full.json"), dirty).add("m/p/1/1", {})
    with pytest.raises(journal.JournalError, match="the measured code has uncommitted changes"):
        journal.open_journal(str(tmp_path / "dirty"), "full", resume=True, key=dirty)
    with journal.recording(again, "peers_at_size"):
        runs = repeats.run_alternating([side("kfdist"), side("tfx")], 3, lines.append,
                                       pair="at-size")
    assert made == [("tfx", 1), ("kfdist", 1), ("kfdist", 2), ("tfx", 2)]  # the rest, in order
    assert runs[1] == [{"side": "tfx", "round": i} for i in range(3)]
    assert lines[0].startswith("round 1/3, side 1/2: from the journal (made ")
    assert again.earliest("peers_at_size") == saved["runs"]["peers_at_size/at-size/1/1"]["ended"]
    assert again.earliest("peers_sharding") is None
    # Written to results.json, a measure's runs leave the journal; the others stay.
    again.add("peers_sharding/1gb-csv/1/1", {"pipeline_seconds": 60.0})
    again.forget(["peers_at_size"])
    assert list(json.loads((tmp_path / "journal-full.json").read_text())["runs"]) == [
        "peers_sharding/1gb-csv/1/1"]
    again.forget(["peers_sharding"])
    assert not (tmp_path / "journal-full.json").exists()
    # Outside a recording (or without a pair name) nothing is journaled.
    repeats.run_alternating([side("a"), side("b")], 1, pair="other")
    assert not (tmp_path / "journal-full.json").exists()


def test_a_journal_is_never_thrown_away_unasked_nor_mixed_with_other_code(tmp_path, capsys):
    from benchmarks import journal
    from benchmarks.__main__ import main

    kept = journal.Journal(str(tmp_path / "journal-full.json"), journal.key_for("full"))
    kept.add("peers_penguins/penguins/1/1", {"total_seconds": 20.0})
    before = (tmp_path / "journal-full.json").read_text()
    assert main(["--peers", "--out-dir", str(tmp_path)]) == 2
    assert (tmp_path / "journal-full.json").read_text() == before  # left as it was
    other = journal.Journal(str(tmp_path / "journal-full.json"),
                            dict(journal.key_for("full"), code="0" * 40))
    other.add("peers_penguins/penguins/1/1", {"total_seconds": 20.0})
    before = (tmp_path / "journal-full.json").read_text()
    assert main(["--peers", "--resume", "--out-dir", str(tmp_path)]) == 2
    assert (tmp_path / "journal-full.json").read_text() == before
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"python -m benchmarks: {tmp_path}/journal-full.json holds 1 "
                               "run(s) of an unfinished run (code ")
    assert lines[0].endswith(": --resume continues it; delete the file to start over")
    assert "made with code '" + "0" * 40 + "' here " in lines[1]
    assert lines[1].endswith("they are not mixed: delete the file to start over")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["journal-full.json"]  # nothing else
    (tmp_path / "journal-full.json").write_text('{"key": ')
    with pytest.raises(journal.JournalError, match="journal-full.json is not a journal \\("):
        journal.open_journal(str(tmp_path), "full", resume=True)
    # A quick run has its own journal and does not trip over a full run's.
    assert journal.open_journal(str(tmp_path), "quick", resume=False).runs == {}


def test_the_journals_key_is_the_last_commit_of_the_measured_code(tmp_path):
    from benchmarks import journal

    def git(*args):
        return subprocess.run(["git", *args], cwd=tmp_path, capture_output=True, text=True,
                              check=True).stdout.strip()

    git("init", "-q")
    git("config", "user.email", "t@example.com")
    git("config", "user.name", "t")
    (tmp_path / "kfdist").mkdir()
    (tmp_path / "kfdist" / "a.py").write_text("x = 1\n")
    git("add", "-A")
    git("commit", "-q", "-m", "code")
    code = git("rev-parse", "HEAD")
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "results.json").write_text("{}")
    (tmp_path / "README.md").write_text("words\n")
    git("add", "-A")
    git("commit", "-q", "-m", "results and words")
    assert journal.code_version(str(tmp_path)) == code  # results and docs are not code
    (tmp_path / "kfdist" / "a.py").write_text("x = 2\n")
    assert journal.code_version(str(tmp_path)) == code + "+dirty"


def test_one_held_out_row_is_shown_in_as_many_decimals_as_it_takes():
    """At a million rows one held-out row weighs 0.000005, not the 0.0 four decimals give."""
    from benchmarks.peer_report import one_row

    assert one_row(69) == "0.0145"
    assert one_row(200_000) == "0.000005"
    assert one_row(800) == "0.00125"


def test_the_sharding_report_names_the_runs_it_did_not_count():
    from benchmarks.peer_report import rejected_runs

    counted = {"runs": [{"examples": 10}]}
    measure = {"kfdist_local": counted, "kfdist_beam": counted,
               "tfx": {"runs": [{"examples": 10, "rejected_runs": [{"examples": 1_109_103},
                                                                   {"examples": 9}]}]}}
    assert rejected_runs(measure) == (" Runs not counted because their output lacked rows of the "
                                      "table, each run again: tfx 2 (1,109,103, 9 rows).")
    assert rejected_runs(dict(measure, tfx=counted)) == ""


def test_a_quick_or_partial_run_leaves_the_other_measures_files_alone(tmp_path):
    """Written with the committed results (every measure's real figures) as the earlier run's:
    a quick run writes files of its own, and a full run of one measure keeps every other
    measure's figures and headers and leaves the peer snippet byte for byte as it was."""
    import shutil

    from benchmarks import peer_report
    from benchmarks.common import REPO_ROOT
    from benchmarks.results_files import result_files, write_results

    committed = {}
    for name in result_files("full"):
        shutil.copy(os.path.join(REPO_ROOT, "benchmarks", name), tmp_path / name)
        committed[name] = (tmp_path / name).read_bytes()
    earlier = json.loads(committed["results.json"])
    assert {"sharding", *peer_report.SNIPPET_MEASURES} <= set(earlier["measures"])
    header = {"commit": "f" * 40, "command": "python -m benchmarks --quick",
              "date": "2026-11-28 06:00 UTC", "machine": earlier["machine"]}
    sharding = earlier["measures"]["sharding"]

    text = write_results({"mode": "quick", **header, "seconds": 80,
                          "measures": {"sharding": sharding}, "headers": {"sharding": header}},
                         str(tmp_path))
    assert {name: (tmp_path / name).read_bytes() for name in committed} == committed
    quick = json.loads((tmp_path / "results-quick.json").read_text())
    assert set(quick["measures"]) == {"sharding"} and quick["mode"] == "quick"
    assert (tmp_path / "results-quick.md").read_text() == text and "| MNIST 10x |" in text
    assert not (tmp_path / "results-peers-quick.md").exists()

    again = json.loads(json.dumps(sharding))
    again["mnist"]["local_peak_memory_10x_over_1x"] = 1.01
    partial = dict(header, command="python -m benchmarks --only sharding")
    text = write_results({"mode": "full", **partial, "seconds": 300,
                          "measures": {"sharding": again}, "headers": {"sharding": partial}},
                         str(tmp_path))
    assert (tmp_path / "results-peers.md").read_bytes() == committed["results-peers.md"]
    written = json.loads((tmp_path / "results.json").read_text())
    assert written["measures"] == dict(earlier["measures"], sharding=again)
    assert written["headers"] == dict(earlier["headers"], sharding=partial)
    assert "## End to end at size" in text and "| MNIST 10x |" in text
