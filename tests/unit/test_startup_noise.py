"""TensorFlow's start-up lines about a GPU it cannot use (as TensorFlow 2.21 prints them on a
machine without a CUDA driver) reach a replica's log as one line that is not an error line;
every other line passes unchanged, a per-replica value is still folded around them."""

from kfdist.components.common import startup_noise, value_folding

#: What one replica printed as TensorFlow loaded, on the bed's node (no GPU).
PRINTED = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1795937432.828980       1 cudart_stub.cc:31] Could not find cuda drivers on your "
    "machine, GPU will not be used.",
    "E0000 00:00:1795937438.927945       1 cuda_platform.cc:52] failed call to cuInit: INTERNAL: "
    "CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)",
    "replica worker:0 pid=1 leader=True cluster: 2 worker",
    "E0000 00:00:1795937440.000000       1 some_op.cc:7] a real error",
]


def test_the_gpu_notices_become_one_plain_line_and_others_pass():
    shown = value_folding.folded_lines(PRINTED)
    assert shown == [startup_noise.NO_GPU, "replica worker:0 pid=1 leader=True cluster: 2 worker",
                     "E0000 00:00:1795937440.000000       1 some_op.cc:7] a real error"]
    # Kubeflow Pipelines' log viewer paints a line that says "error" or "fail" red.
    assert not any(word in startup_noise.NO_GPU.lower() for word in ("error", "fail"))


def test_a_cuinit_failure_on_a_machine_with_a_driver_is_kept():
    line = ("E0000 00:00:1795937438.927945       1 cuda_platform.cc:52] failed call to cuInit: "
            "INTERNAL: CUDA error: Failed call to cuInit: CUDA_ERROR_NO_DEVICE (100)")
    assert startup_noise.quieted(line) == line


def test_a_line_that_only_mentions_cuda_is_kept():
    line = "training on cuda drivers: see the docs"
    assert startup_noise.quieted(line) == line


def test_a_value_fold_is_not_broken_by_the_notices():
    lines = ["Attempt to convert a value (PerReplica:{", "  0: <tf.Tensor: shape=(2,)>",
             PRINTED[1], "  1: <tf.Tensor: shape=(2,)>", "}) with an unsupported type"]
    [joined] = value_folding.folded_lines(lines)
    assert joined.startswith("Attempt to convert") and "2 line(s)" in joined
