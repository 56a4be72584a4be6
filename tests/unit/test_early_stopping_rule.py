"""The pure parts of keeping the best epoch: the validation part, the rule, its wording, the
advice the curves give, and the step's checks of the new parameters."""

from __future__ import annotations

import math

import pytest

from kfdist.components.common.errors import InvalidInputError
from kfdist.components.common.kept_epoch import Decision, KeptEpoch, decide
from kfdist.components.evaluate_model.fit_gap import fit_advice
from kfdist.components.train_distributed import runtime
from kfdist.components.train_distributed.job import validation_part


@pytest.mark.parametrize("sizes, fraction", [([36, 35, 36, 35], 0.1), ([455], 0.2),
                                             ([7, 0, 13, 1], 0.25), ([1000] * 3, 0.5)])
def test_the_validation_part_is_every_nth_record_and_counted_exactly(sizes, fraction):
    total = sum(sizes)
    chosen = [g for g in range(total) if validation_part.in_validation_part(g, fraction)]
    counts = validation_part.split_counts(sizes, fraction, carve=True)
    assert counts.validation == len(chosen) == math.floor(total * fraction)
    assert counts.training + counts.validation == total
    # Spread evenly: gaps between chosen records never differ by more than one.
    gaps = {b - a for a, b in zip(chosen, chosen[1:])}
    assert max(gaps, default=0) - min(gaps, default=0) <= 1
    # Each shard's share, from its offset, adds up to the same records.
    offsets = validation_part.shard_offsets(sizes)
    assert sum(validation_part.validation_count(o, n, fraction)
               for o, n in zip(offsets, sizes)) == len(chosen)
    assert validation_part.split_counts(sizes, fraction, carve=False) == (
        validation_part.SplitCounts(total, 0))


def test_tensorflow_picks_the_same_records_as_the_count(tmp_path):
    """The replica's tf.data filter and the step's count agree record by record."""
    import tensorflow as tf

    from kfdist.components.train_distributed.replica import validation_input

    sizes, fraction = [23, 17, 31], 0.15
    paths = []
    for i, size in enumerate(sizes):
        path = str(tmp_path / f"shard-{i}.tfrecord")
        with tf.io.TFRecordWriter(path) as writer:
            for j in range(size):
                writer.write(f"{i}:{j}".encode())
        paths.append(path)
    offsets = validation_part.shard_offsets(sizes)

    def read(validation):
        table = validation_input.shard_table(paths, offsets)
        return [r.decode() for r in table.flat_map(
            lambda p, o: validation_input.shard_records(p, o, "", fraction, validation))
                .as_numpy_iterator()]

    positions = {f"{i}:{j}": offsets[i] + j for i, n in enumerate(sizes) for j in range(n)}
    held = read(True)
    assert [positions[r] for r in held] == [
        g for g in range(sum(sizes)) if validation_part.in_validation_part(g, fraction)]
    assert sorted(held + read(False)) == sorted(positions)  # every record, once


@pytest.mark.parametrize("losses, patience, best, improved, stop", [
    ([], 5, None, False, False),
    ([0.5], 5, 1, True, False),
    ([0.5, 0.4, 0.3], 2, 3, True, False),
    ([0.5, 0.3, 0.4, 0.45], 2, 2, False, True),            # two epochs without a lower loss
    ([0.5, 0.3, 0.4], 2, 2, False, False),
    ([0.5, 0.3, 0.3, 0.3], 2, 2, False, True),             # equal is not lower: the first kept
    ([float("nan"), None, 0.7, float("nan")], 5, 3, False, False),
    ([float("nan")] * 3, 3, None, False, True),
])
def test_the_rule_is_kerass_patience_over_the_losses_so_far(losses, patience, best, improved,
                                                           stop):
    assert decide(losses, patience) == Decision(best, improved, stop)


#: scikit-learn's wine table, the tabular pipeline's defaults: the validation part's loss per
#: epoch (14 train rows; it falls for all 30 epochs) and the held-out loss (lowest at epoch 9,
#: 0.134; 0.397 at epoch 30), as measured.
WINE_SELECTION = [0.49264, 0.20947, 0.09294, 0.05170, 0.02820, 0.01391, 0.00702, 0.00320,
                  0.00151, 0.00079, 0.00048, 0.00035, 0.00027, 0.00023, 0.00020, 0.00016,
                  0.00011, 0.00008, 0.00006, 0.00005, 0.00004, 0.00003, 0.00003, 0.00002]
WINE_HELD_OUT = [0.4744, 0.2483, 0.1651, 0.1604, 0.1584, 0.1583, 0.1659, 0.1451, 0.1344,
                 0.1457, 0.1802, 0.2493, 0.3123, 0.3712, 0.4241, 0.4537]


def test_a_loss_creeping_towards_zero_stops_once_it_falls_less_than_min_delta():
    """Keras's min_delta: an epoch improves only more than min_delta below the best; the best
    is then the last that did. On wine, min_delta 0 never stops (the loss falls each epoch)."""
    assert not decide(WINE_SELECTION, 5).stop
    decisions = [decide(WINE_SELECTION[:n], 5, 0.001) for n in range(1, 17)]
    assert [d.best_epoch for d in decisions][8:] == [9, 9, 11, 11, 11, 11, 11, 11]
    assert [d.stop for d in decisions].index(True) == 15  # after epoch 16: 5 past epoch 11
    # The epoch kept is far nearer the held-out minimum than the last epoch is.
    assert WINE_HELD_OUT[11 - 1] < 1.4 * min(WINE_HELD_OUT) < WINE_HELD_OUT[-1]
    # The first finite loss is the best whatever min_delta; a fall of exactly min_delta is not.
    assert decide([None, 0.5], 5, 10.0) == Decision(2, True, False)
    assert decide([0.5, 0.25], 5, 0.25).best_epoch == 1


def test_the_decision_after_a_restart_is_the_one_made_before_it():
    """A replica restarted after epoch r decides from the first r losses: the same as the run
    that was not interrupted decided after epoch r."""
    losses = [0.9, 0.6, 0.5, 0.55, 0.52, 0.49, 0.6, 0.7, 0.8]
    decisions = [decide(losses[:r], 3) for r in range(1, len(losses) + 1)]
    assert [d.best_epoch for d in decisions] == [1, 2, 3, 3, 3, 6, 6, 6, 6]
    assert [d.stop for d in decisions].index(True) == 8  # after epoch 9: 3 epochs past epoch 6


@pytest.mark.parametrize("kept, said", [
    (KeptEpoch(3, 8, 30, 5, True, 0.2154),
     "kept epoch 3 (the lowest validation loss, 0.2154); stopped after epoch 8 of 30: no lower "
     "validation loss in the 5 epochs after it (patience 5)"),
    (KeptEpoch(10, 10, 10, 5, False, 0.05),
     "kept the last epoch, 10 of 10 (the lowest validation loss, 0.0500)"),
    (KeptEpoch(7, 10, 10, 5, False, 0.05),
     "kept epoch 7 of 10 (the lowest validation loss, 0.0500; no lower validation loss in the "
     "3 epochs after it)"),
    (KeptEpoch(11, 16, 30, 5, True, 0.00048, 0.001),
     "kept epoch 11 (the best validation loss, 0.0005); stopped after epoch 16 of 30: no "
     "validation loss more than 0.001 below it in the 5 epochs after it (patience 5)"),
    (KeptEpoch(9, 10, 10, 5, False, 0.0015, 0.001),
     "kept epoch 9 of 10 (the best validation loss, 0.0015; no validation loss more than 0.001 "
     "below it in the epoch after it)"),
    (KeptEpoch(30, 30, 30), "kept the last epoch, 30 of 30: early stopping is off"),
])
def test_which_epoch_was_kept_and_why_in_one_line(kept, said):
    assert kept.describe() == said
    assert KeptEpoch.from_metrics(kept.metric_values()) == kept
    assert kept.summary()["kept_why"] == said


def test_no_kept_epoch_in_metrics_of_an_older_step():
    assert KeptEpoch.from_metrics({"final_accuracy": 0.9}) is None


BREAST_CANCER_LIKE = {  # the shape measured on scikit-learn's breast cancer table, lr 0.01
    "loss": [0.35, 0.12, 0.06, 0.05, 0.04, 0.03, 0.03, 0.02],
    "val_loss": [0.078, 0.094, 0.132, 0.108, 0.132, 0.193, 0.145, 0.112],
    "selection_loss": [0.23, 0.22, 0.215, 0.33, 0.326, 0.256, 0.273, 0.383],
}


def test_a_rising_held_out_loss_is_over_fitting_whatever_the_final_gap():
    last_kept = KeptEpoch(8, 8, 8)
    advice = fit_advice(BREAST_CANCER_LIKE, 0.99, 0.96, last_kept)  # accuracies within 0.1
    assert advice.warning
    assert advice.text.startswith("held-out loss was lowest at epoch 1 (0.0780) and rose to "
                                  "0.1120 by epoch 8 while training loss fell to 0.0200: the "
                                  "model over-fits after epoch 1")
    assert "the last epoch was kept; turn early stopping on" in advice.text


def test_with_early_stopping_the_advice_says_how_the_kept_epoch_fares():
    near = dict(BREAST_CANCER_LIKE, val_loss=[0.078, 0.094, 0.09, 0.108, 0.132, 0.193, 0.145,
                                              0.112])
    advice = fit_advice(near, 0.98, 0.96, KeptEpoch(3, 8, 30, 5, True, 0.215))
    assert not advice.warning  # its held-out loss within 20 % of the lowest: a note
    assert "early stopping kept epoch 3, held-out loss 0.0900. A lower learning rate" in (
        advice.text)
    far = fit_advice(BREAST_CANCER_LIKE, 0.98, 0.96, KeptEpoch(3, 8, 30, 5, True, 0.215))
    assert far.warning and "kept epoch 3, held-out loss 0.1320, a later one" in far.text


def test_a_kept_epoch_far_past_the_held_out_minimum_is_a_warning():
    """Scikit-learn's wine table at the tabular defaults: the validation part's loss fell to the
    last epoch while the held-out loss doubled."""
    wine = {"loss": [0.9, 0.42, 0.17, 0.07, 0.06, 0.015, 0.01],
            "val_loss": [0.47, 0.25, 0.17, 0.16, 0.158, 0.1583, 0.397]}
    advice = fit_advice(wine, 1.0, 0.917, KeptEpoch(7, 7, 7, 5, False, 0.0001))
    assert advice.warning
    assert advice.text.endswith("early stopping kept epoch 7, held-out loss 0.3970, a later "
                                "one than the held-out loss would: a larger validation_fraction "
                                "(a steadier validation loss), a larger early_stopping_min_delta, "
                                "a lower learning rate or fewer epochs would keep a better epoch")


def test_without_an_eval_curve_the_validation_part_is_read():
    history = {"loss": [0.5, 0.3, 0.2, 0.1], "selection_loss": [0.4, 0.3, 0.5, 0.6]}
    advice = fit_advice(history, 0.9, 0.88, KeptEpoch(2, 4, 4, 2, False, 0.3))
    assert advice.text.startswith("validation loss was lowest at epoch 2 (0.3000)")


def test_the_final_gap_still_counts_and_a_falling_curve_asks_for_more_epochs():
    flat = {"val_loss": [0.5, 0.45, 0.44]}
    gap = fit_advice(flat, 1.0, 0.699)
    assert gap.warning and gap.text.startswith("training accuracy 1.000 but held-out 0.699")
    falling = fit_advice({"val_loss": [0.9, 0.7, 0.5, 0.4]}, 0.9, 0.88, KeptEpoch(4, 4, 4, 5))
    assert not falling.warning and "still falling at the last epoch, 4" in falling.text
    assert fit_advice({"val_loss": [0.9, 0.7, 0.5, 0.4]}, 0.9, 0.88,
                      KeptEpoch(4, 4, 30, 5, True)) is None  # stopped early: not more epochs
    assert fit_advice({"val_loss": [0.5, 0.49, 0.5]}, 0.9, 0.88) is None
    assert fit_advice({}, None, 0.9) is None


@pytest.mark.parametrize("change, named", [
    ({"early_stopping_patience": -1},
     "early_stopping_patience must be an integer >= 1, or 0 for no early stopping, got -1"),
    ({"validation_fraction": 0.0}, "validation_fraction must be a number in (0, 0.5], got 0.0"),
    ({"validation_fraction": 0.7}, "validation_fraction must be a number in (0, 0.5], got 0.7"),
    ({"early_stopping_min_delta": -0.01},
     "early_stopping_min_delta must be a finite number >= 0, got -0.01"),
    ({"early_stopping_min_delta": float("inf")},
     "early_stopping_min_delta must be a finite number >= 0, got inf"),
])
def test_bad_settings_are_named_before_anything_starts(change, named):
    with pytest.raises(InvalidInputError) as error:
        runtime.validate_training_args(**change)
    assert named in str(error.value)


def test_zero_patience_turns_early_stopping_off():
    step = runtime.build_job(early_stopping_patience=0)
    assert step.training.early_stopping_patience is None
    assert not step.training.holds_out_validation
    assert runtime.build_job().training.early_stopping_patience == 5
    assert runtime.build_job().training.early_stopping_min_delta == 0.001
    assert runtime.build_job(early_stopping_min_delta=0).training.early_stopping_min_delta == 0


def test_a_train_split_too_small_to_set_an_example_aside_is_refused(tmp_path):
    from kfdist.components.shard_dataset import runtime as shard_runtime

    csv = tmp_path / "tiny.csv"
    csv.write_text("x,label\n" + "".join(f"{i},{i % 2}\n" for i in range(8)))
    meta = shard_runtime.shard(str(csv), str(tmp_path / "dataset"), source_format="csv",
                               num_shards=1, log=lambda _: None)
    train = meta.splits["train"].num_examples
    assert train < 10
    with pytest.raises(InvalidInputError) as error:
        runtime.train(str(tmp_path / "dataset"), str(tmp_path / "model"), log=lambda _: None,
                      workers=1, batch_size_per_replica=1)
    assert str(error.value) == (
        f"validation_fraction=0.1 of a train split of {train} examples sets none aside for "
        "early stopping; raise validation_fraction, or set early_stopping_patience=0")
    assert not (tmp_path / "model").exists()  # refused before anything was created
