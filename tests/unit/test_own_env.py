"""kfdist's own processes choose tf-keras for themselves; none of the variables they set reach
a user's program, and importing kfdist (as a program does for `kfdist.program`) sets none."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from kfdist.components.common.own_env import OWN_ENV, use_own_env, user_environ
from kfdist.components.train_distributed.local import local_backend

USER_SHELL = {"PATH": "/usr/bin", "HOME": "/home/me"}


def test_a_kfdist_process_sets_its_variables_and_a_program_gets_the_users_environment():
    env = dict(USER_SHELL)
    use_own_env(env)
    assert {name: env[name] for name in OWN_ENV} == OWN_ENV
    assert user_environ(env) == USER_SHELL


def test_what_the_user_exported_is_kept_for_kfdist_and_passed_on_unchanged():
    exported = {**USER_SHELL, "TF_USE_LEGACY_KERAS": "0"}
    env = dict(exported)
    use_own_env(env)
    assert env["TF_USE_LEGACY_KERAS"] == "0" and env["TF_CPP_MIN_LOG_LEVEL"] == "1"
    assert user_environ(env) == exported


def test_a_kfdist_process_started_by_another_still_knows_what_kfdist_set():
    parent = dict(USER_SHELL)
    use_own_env(parent)
    child = dict(parent)  # e.g. a pipeline step that kfp.local starts, which starts the program
    use_own_env(child)
    assert child == parent and user_environ(child) == USER_SHELL


def test_importing_kfdist_and_its_program_helpers_changes_no_variable():
    code = ("import json, os, sys; before = dict(os.environ); import kfdist, kfdist.program; "
            "json.dump({k: v for k, v in os.environ.items() if before.get(k) != v}, sys.stdout)")
    shell = {k: v for k, v in os.environ.items() if not k.startswith(("TF_", "KFDIST_"))}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=shell, timeout=120, check=True)
    assert json.loads(done.stdout) == {}


def test_kfdists_own_replicas_choose_tf_keras_whatever_the_user_exported(monkeypatch):
    monkeypatch.setenv("TF_USE_LEGACY_KERAS", "0")
    assert local_backend.replica_env(None, "/jobs/tmp")["TF_USE_LEGACY_KERAS"] == "1"
