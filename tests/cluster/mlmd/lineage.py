"""Prints what ML Metadata holds of one Kubeflow Pipelines run, as JSON: the lineage the UI shows.

Run it with the mlmd environment's python (install.sh prints its path), against the bed's MLMD
server (`DIR/kfp.json` names its address):

    "$python" tests/cluster/mlmd/lineage.py --host 10.240.0.1 --port 44243 RUN_ID

Prints `{"executions": [{"task", "type", "state"}], "artifacts": [{"name", "type", "uri",
"metadata"}]}` (an artifact's metadata: the custom properties the launcher recorded) for the run's context (`system.PipelineRun` named by the run's id); exits 1 with
one line when MLMD has no such run.
"""

from __future__ import annotations

import argparse
import json
import sys

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as pb

RUN_CONTEXT = "system.PipelineRun"


def _value(value: pb.Value):
    """A custom property's value as JSON (KFP keeps an artifact's metadata in a struct)."""
    kind = value.WhichOneof("value")
    if kind == "struct_value":
        from google.protobuf.json_format import MessageToDict

        return MessageToDict(value.struct_value)
    return getattr(value, kind) if kind else None


def lineage(store: metadata_store.MetadataStore, run_id: str) -> dict:
    """The run's executions and artifacts."""
    context = store.get_context_by_type_and_name(RUN_CONTEXT, run_id)
    if context is None:
        raise LookupError(f"MLMD has no {RUN_CONTEXT} context named {run_id!r}")
    types = {t.id: t.name for t in store.get_execution_types()}
    types.update({t.id: t.name for t in store.get_artifact_types()})
    executions = [{"task": _value(e.custom_properties["task_name"])
                   if "task_name" in e.custom_properties else e.name,
                   "type": types.get(e.type_id, ""),
                   "state": pb.Execution.State.Name(e.last_known_state)}
                  for e in store.get_executions_by_context(context.id)]
    artifacts = [{"name": _value(a.custom_properties["display_name"])
                  if "display_name" in a.custom_properties else a.name,
                  "type": types.get(a.type_id, ""), "uri": a.uri,
                  "metadata": {key: _value(value) for key, value in a.custom_properties.items()
                               if key != "display_name"}}
                 for a in store.get_artifacts_by_context(context.id)]
    return {"executions": executions, "artifacts": artifacts}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("run_id")
    args = parser.parse_args()
    config = pb.MetadataStoreClientConfig(host=args.host, port=args.port)
    try:
        print(json.dumps(lineage(metadata_store.MetadataStore(config), args.run_id), indent=1))
    except LookupError as missing:
        print(f"lineage: {missing}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
