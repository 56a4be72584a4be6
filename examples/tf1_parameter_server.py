"""A TF1-style between-graph parameter-server program (tf.compat.v1), as TFJob users write it.

Every replica builds the same graph; `replica_device_setter` puts the
variables on the parameter servers. Worker 0 is the chief: it initialises
the variables and checkpoints into `KFDIST_CHECKPOINT_DIR`, then writes the
learned weights to `KFDIST_MODEL_DIR/weights.json`. Run it with
`kfdist launch --framework tensorflow --workers 2 --ps 1 -- python tf1_parameter_server.py`.
"""

import argparse
import json
import os

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    tf1.disable_eager_execution()
    config = json.loads(os.environ["TF_CONFIG"])
    job, index = config["task"]["type"], config["task"]["index"]
    cluster = tf.train.ClusterSpec(config["cluster"])
    server = tf.distribute.Server(cluster, job_name=job, task_index=index)
    if job == "ps":
        server.join()  # serves the variables until the job ends
        return
    is_chief = index == 0
    # In TF2 a device function needs tf.compat.v1.device, not tf.device.
    with tf1.device(tf1.train.replica_device_setter(
            worker_device=f"/job:worker/task:{index}", cluster=cluster)):
        x = tf1.placeholder(tf.float32, [None, 1])
        y = tf1.placeholder(tf.float32, [None, 1])
        w = tf1.get_variable("w", [1, 1], initializer=tf1.zeros_initializer())
        b = tf1.get_variable("b", [1], initializer=tf1.zeros_initializer())
        loss = tf1.reduce_mean(tf1.square(tf1.matmul(x, w) + b - y))
        global_step = tf1.train.get_or_create_global_step()
        train_op = tf1.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
    rng = np.random.default_rng(index)
    print(f"worker {index} of {len(cluster.as_dict()['worker'])} training", flush=True)
    session_config = tf1.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{index}"])
    hooks = [tf1.train.StopAtStepHook(last_step=args.steps)]
    with tf1.train.MonitoredTrainingSession(
            master=server.target, is_chief=is_chief, hooks=hooks, config=session_config,
            checkpoint_dir=os.environ["KFDIST_CHECKPOINT_DIR"] if is_chief else None) as sess:
        step = 0
        while not sess.should_stop():
            xs = rng.uniform(-1, 1, (32, 1)).astype(np.float32)
            _, step, value, *weights = sess.run([train_op, global_step, loss, w, b],
                                                {x: xs, y: 3 * xs + 2})
            if step % 50 == 0:
                print(f"step {step} loss {value:.4f}", flush=True)
    if is_chief:
        with open(os.path.join(os.environ["KFDIST_MODEL_DIR"], "weights.json"), "w") as f:
            json.dump({"w": float(weights[0][0][0]), "b": float(weights[1][0]), "step": int(step)}, f)
        print(f"chief done at step {step}", flush=True)


if __name__ == "__main__":
    main()
