"""The KFP benchmark's arithmetic: a step's phases from its pods and log, and the rounds' summary
(the measure itself runs on the genuine node's bed: `python -m benchmarks --only kfp_backend`)."""

import pytest

from benchmarks import kfp_backend


def _pod(created: str, finished: str = "") -> dict:
    status = ({"containerStatuses": [{"state": {"terminated": {"finishedAt": finished}}}]}
              if finished else {})
    return {"metadata": {"creationTimestamp": created}, "status": status}


LINES = ["2026-11-29T02:39:57.468721311Z I1129 02:39:57.467732 15 main.go:67] Setting log level",
         "2026-11-29T02:39:58.606221643Z [KFP Executor ...]: Looking for component `shard`",
         "2026-11-29T02:40:10.371289262Z I1129 02:40:10.370853 15 launcher_v2.go:1230] "
         "ExecutorOutput: {",
         "2026-11-29T02:40:10.676591579Z I1129 02:40:10.675764 15 launcher_v2.go:206] publish "
         "success."]


def test_a_steps_phases_follow_its_pods_and_launcher_lines():
    found = kfp_backend.phases(_pod("2026-11-29T02:39:40Z", "2026-11-29T02:39:47Z"),
                               _pod("2026-11-29T02:39:52Z"), LINES)
    assert found == {"driver": 7.0, "pod_start": 5.47, "inputs": 1.14, "component": 11.77,
                     "outputs": 0.31}
    with pytest.raises(StopIteration):  # a step that never published
        kfp_backend.phases(_pod("2026-11-29T02:39:40Z", "2026-11-29T02:39:47Z"),
                           _pod("2026-11-29T02:39:52Z"), LINES[:3])


def test_the_summary_compares_the_rounds_and_splits_kfps_time():
    steps = dict.fromkeys(kfp_backend.STEPS, 2.0)
    phases = dict(driver=3.0, pod_start=4.0, inputs=0.5, component=2.0, outputs=0.5)
    local = [{"wall": 10.0, "steps": steps}, {"wall": 12.0, "steps": steps}]
    remote = [{"wall": w, "steps": {s: phases for s in kfp_backend.STEPS}} for w in (50.0, 60.0)]
    summary = kfp_backend.summarise(local, remote)
    assert summary["kfp_over_local"]["values"] == [5.0, 5.0]
    assert summary["steps"]["train"]["kfp"]["median"] == 10.0
    assert summary["kfp_by_phase"]["pod_start"]["median"] == 16.0
    assert summary["kfp_between_steps"]["values"] == [10.0, 20.0]
    assert "| (the whole run) |" in "\n".join(kfp_backend.report_lines(summary))


def test_a_kfp_bed_that_is_not_one_is_refused_in_one_line(tmp_path, capsys):
    from benchmarks.__main__ import main

    assert main(["--only", "kfp_backend", "--kfp-bed", str(tmp_path), "--out-dir",
                 str(tmp_path / "out")]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"python -m benchmarks: --kfp-bed {tmp_path}: no bed with Kubeflow")
    assert not (tmp_path / "out").exists()
