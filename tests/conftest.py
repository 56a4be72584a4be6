"""Shared fixtures: small real datasets made on the fly (nothing is downloaded)."""

from __future__ import annotations

import hashlib
import os
import time

import pytest

from kfdist.components.common import legacy_keras  # noqa: F401  (tf-keras for every test)

#: Fixtures of the test doubles (the GCS emulator, the KFP server, a model), of a real S3 server
#: (MinIO), of the cluster test bed and of the Kubeflow Pipelines runs its tests share; the plugin
#: that names a failed test the moment it fails (`failures_at_once`), and pytest's own for running
#: pytest inside a test (pytester).
pytest_plugins = ("fakes.gcs_emulator", "fakes.s3_server", "fakes.kfp_server", "cluster.fixture",
                  "fakes.model_fixture", "containers.kfp_bed_runs", "failures_at_once",
                  "pytester")

#: The tests that need a cluster test bed or kfdist's images, grouped by the session fixture they
#: share (the first here that a test uses names its group): pytest-xdist's `--dist loadgroup` runs
#: a group in order on one worker, so each bed starts once, and the other tests beside it. The
#: tests whose training step runs on this host (kfp.local, `kfdist launch`) are one group: they
#: share the machine's /mnt/kfdist (`host_mount`). Those whose steps run in the genuine node's
#: pods (Kubeflow Pipelines') are another, on the same node (`cluster.shared_bed`). The Trainer
#: v2.1 bed has a genuine node too, and so waits until that one stops: its group starts last
#: (`LAST_GROUPS`), when no test of the other two is left (nor any other user of /mnt/kfdist).
BED_GROUPS = (("trainer_v2_1_bed", "trainer-v2.1"), ("host_mount", "host-steps"),
              ("bed_namespace", "host-steps"), ("node_bed", "node-bed"),
              ("bare_api", "api-server"), ("kfdist_images", "images"))


#: The fixtures of running beds: each is stopped (or left, when shared: `cluster.shared_bed`)
#: right after the last test of its group that uses it (`cluster.fixture.stop_bed`), not at the
#: end of its worker's session, so that it does not take the CPU from the tests that run after
#: its group. The groups of a shared bed start first (`GROUP_ORDER`), one on each worker; in one
#: process (or on one worker) a bed is stopped after the run's last test that uses it.
BED_FIXTURES = tuple(fixture for fixture, _ in BED_GROUPS
                     if fixture not in ("kfdist_images", "host_mount", "bed_namespace"))
_last_users: dict = {}


def _stop_group(item) -> str:
    """The group after whose last test a bed `item` uses stops: its xdist group when the run
    has workers enough for each group of a shared bed, else the whole run's ("")."""
    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) < 2:
        return ""
    return item.get_closest_marker("xdist_group").args[0]


def pytest_collection_finish(session):
    """Notes the last test (in the run's order, the deselected left out) that uses each bed, in
    each group (`_stop_group`)."""
    for item in session.items:
        for fixture in BED_FIXTURES:
            if fixture in getattr(item, "fixturenames", ()):
                _last_users[fixture, _stop_group(item)] = item.nodeid


@pytest.hookimpl(trylast=True)  # after the test's own fixtures (its namespace) are torn down
def pytest_runtest_teardown(item, nextitem):
    """Stops each bed whose last test (of its group) this was."""
    del nextitem
    from cluster.fixture import stop_bed

    for (fixture, _), nodeid in _last_users.items():
        if nodeid == item.nodeid:
            stop_bed(fixture)


#: The group name of the tests outside the bed groups is their module's path: a module's tests run
#: on one worker, so a module-scoped fixture (most end-to-end modules run kfdist once and assert on
#: that run) is made once, not once per worker.
MODULE_GROUP_SEPARATOR = "::"


#: The order the groups start in (pyproject's `--no-loadscope-reorder` keeps it), longest first, so
#: that no long group starts late and ends alone: the beds' groups take 10 to 55 minutes, an
#: end-to-end module a few, a unit module seconds. A group matches its first prefix here.
GROUP_ORDER = ("host-steps", "node-bed", "images", "api-server", "tests/e2e/", "tests/component/")


#: The groups that start after every other.
LAST_GROUPS = ("trainer-v2.1",)


def _start_rank(group: str) -> int:
    """Where `group` starts in `GROUP_ORDER` (the groups it does not name after those, and
    `LAST_GROUPS` last)."""
    if group in LAST_GROUPS:
        return len(GROUP_ORDER) + 1
    return next((i for i, prefix in enumerate(GROUP_ORDER) if group.startswith(prefix)),
                len(GROUP_ORDER))


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the marks into the test ids
def pytest_collection_modifyitems(config, items):
    """Marks each test with its xdist group (its bed's, kfdist's images', or its module's) and
    orders the tests by `GROUP_ORDER`."""
    del config
    groups = {}
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        group = next((name for fixture, name in BED_GROUPS if fixture in fixtures), None)
        if group is None:
            group = item.nodeid.split(MODULE_GROUP_SEPARATOR)[0]
        else:
            item.add_marker(pytest.mark.bed_group)
        item.add_marker(pytest.mark.xdist_group(group))
        groups[item.nodeid] = group
    items.sort(key=lambda item: _start_rank(groups[item.nodeid]))


#: The niceness of the tests outside the bed groups: the beds' controllers, kills and restarts are
#: timed, and two workers' TensorFlow processes on two cores starved them (a kill-and-resume run
#: took three times as long); the other tests take the CPU the beds leave.
OTHER_TESTS_NICENESS = 5


@pytest.hookimpl(tryfirst=True)  # before the test's fixtures start: a bed's processes inherit it
def pytest_runtest_setup(item):
    """Runs a bed group's test (and what it starts) at normal priority, the others below it."""
    grouped = item.get_closest_marker("bed_group") is not None
    if grouped:
        from cluster.fixture import stopped_beds

        stopped = stopped_beds().intersection(getattr(item, "fixturenames", ()))
        assert not stopped, (f"{item.nodeid} uses {stopped}, stopped after its group's last "
                             "test: this worker ran two groups of a shared bed")
    try:
        os.setpriority(os.PRIO_PROCESS, 0, 0 if grouped else OTHER_TESTS_NICENESS)
    except PermissionError:  # not root: the priority stays lowered, as for any user's nice
        pass


#: When set, each test appends "start end worker seconds cpu-seconds test-id" to this file:
#: where a run's minutes went, per worker (`docs/contributing.md`). The CPU is the worker's own
#: and that of the processes it started and waited for (a step's, a replica's), not a pod's.
TIMELINE_ENV = "KFDIST_TEST_TIMELINE"


def _cpu_seconds() -> float:
    """This process's CPU time and that of its waited-for children, in seconds."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Appends the test's start, end, worker and CPU to the timeline file, when one is asked
    for."""
    del nextitem
    start, cpu = time.time(), _cpu_seconds()
    yield
    path = os.environ.get(TIMELINE_ENV)
    if path:
        end, cpu = time.time(), _cpu_seconds() - cpu
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with open(path, "a", encoding="utf-8") as timeline:
            timeline.write(f"{start:.0f} {end:.0f} {worker} {end - start:.1f} {cpu:.1f} "
                           f"{item.nodeid}\n")


def _write_canonical_digits(root: str, num_shards: int = 2) -> str:
    """Writes the digits sample as a kfdist dataset with a plain TFRecordWriter.

    Deliberately independent of shard_dataset: it exercises the dataset
    contract of `dataset_spec` from the reader's side.
    """
    import numpy as np
    import tensorflow as tf

    from kfdist.components.common import dataset_spec as ds
    from kfdist.sample_data import digits_as_mnist

    images, labels = digits_as_mnist()
    order = np.random.default_rng(0).permutation(len(labels))
    images, labels = images[order], labels[order]
    n_eval = len(labels) // 5
    splits = {"eval": (images[:n_eval], labels[:n_eval]), "train": (images[n_eval:], labels[n_eval:])}
    infos = {}
    for split, (imgs, labs) in splits.items():
        os.makedirs(os.path.join(root, split), exist_ok=True)
        shards = []
        for s in range(num_shards):
            rel = f"{split}/shard-{s:05d}-of-{num_shards:05d}.tfrecord"
            path = os.path.join(root, rel)
            with tf.io.TFRecordWriter(path) as w:
                for img, lab in zip(imgs[s::num_shards], labs[s::num_shards]):
                    ex = tf.train.Example(features=tf.train.Features(feature={
                        ds.IMAGE_KEY: tf.train.Feature(bytes_list=tf.train.BytesList(value=[img.tobytes()])),
                        ds.LABEL_KEY: tf.train.Feature(int64_list=tf.train.Int64List(value=[int(lab)])),
                    }))
                    w.write(ex.SerializeToString())
            data = open(path, "rb").read()
            shards.append(ds.ShardInfo(path=rel, num_examples=len(labs[s::num_shards]),
                                       sha256=hashlib.sha256(data).hexdigest(), num_bytes=len(data)))
        infos[split] = ds.SplitInfo(num_examples=len(labs), shards=tuple(shards))
    meta = ds.DatasetMetadata(
        source_uri="sklearn:digits", source_format="mnist_idx",
        feature=ds.FeatureSpec(key=ds.IMAGE_KEY, dtype="uint8", shape=(28, 28)),
        num_classes=10, preprocessing=ds.Preprocessing(kind="scale", scale=1 / 255.0, offset=0.0),
        compression=None, seed=0, eval_fraction=0.2, splits=infos,
        class_names=tuple(str(i) for i in range(10)))
    ds.write_metadata(root, meta)
    return root


@pytest.fixture(scope="session")
def digits_dataset(tmp_path_factory) -> str:
    """A kfdist dataset directory of the 1,797 sample digits (2 train, 2 eval shards)."""
    return _write_canonical_digits(str(tmp_path_factory.mktemp("digits_dataset")))
