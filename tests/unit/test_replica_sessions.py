"""Where the local backend's replica processes sit: their own process group, the step's session.

The group lets the supervisor signal a replica whole and keeps the terminal's Ctrl-C away from
it; the shared session keeps Linux's autogroup scheduler from giving every replica an equal
CPU share whatever its work (a session per replica slowed a parameter_server job).
"""

import json
import os
import sys

from kfdist.components.train_distributed.job import config, tf_config
from kfdist.components.train_distributed.local.supervisor import Supervisor

PRINT_IDS = "import json, os; print(json.dumps([os.getpid(), os.getpgid(0), os.getsid(0)]))"


def test_each_replica_leads_its_own_group_in_the_steps_session():
    lines = []
    spec = config.JobSpec(backend="local", workers=2, success_policy="AllWorkers")
    supervisor = Supervisor(lines.append, spec, "multi_worker_mirrored")
    for index in range(2):
        supervisor.add(tf_config.Task("worker", index), [sys.executable, "-c", PRINT_IDS],
                       dict(os.environ))
    supervisor.run()
    ids = [json.loads(line.split("] ", 1)[1]) for line in lines if line.startswith("[worker-")]
    assert len(ids) == 2
    for pid, group, session in ids:
        assert group == pid != os.getpgid(0)
        assert session == os.getsid(0)
