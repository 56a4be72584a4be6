"""KFP interface of `export_saved_model`; the work is done by `runtime.export`."""

from typing import NamedTuple

from kfp import dsl

from kfdist import RUNTIME_IMAGE


@dsl.component(base_image=RUNTIME_IMAGE, install_kfp_package=False)
def export_saved_model(
    model: dsl.Input[dsl.Model],
    blessing: dsl.Input[dsl.Artifact],
    export_base: str,
    export: dsl.Output[dsl.Artifact],
    serving_model_name: str = "mnist",
    version: int = 0,
) -> NamedTuple("ExportOutputs", [("exported", bool), ("export_path", str)]):
    """Exports a blessed model for TF Serving; records why when it is not blessed.

    The pipelines run this task under `dsl.If(blessed)`, so an unblessed
    model's export is skipped in the DAG. The step still reads the blessing
    (as TFX's Pusher does): wired without that gate, it writes nothing for an
    unblessed model and records why.

    Args:
        model: Model written by `train_distributed`.
        blessing: Verdict written by `evaluate_model`.
        export_base: Local path or gs://, s3:// or minio:// URI under which the TF Serving layout
            `<export_base>/<serving_model_name>/<version>/` is written.
        export: Record of the export: metadata `exported`, `path`, `version`, `reason`.
        serving_model_name: Model name in the TF Serving layout (letters,
            digits, `-`, `_`, `.`).
        version: Version number; 0 (the default) means the current Unix time
            (and above every existing version), so the newest export is the one
            TF Serving loads. (An integer, not Optional: kfp's local
            runner cannot pass None as a pipeline parameter.)

    Returns:
        exported: Whether a model was written.
        export_path: The version directory written, or an empty string when
            the model was not blessed.
    """
    import json
    from collections import namedtuple

    from kfdist.components.export_saved_model import runtime

    with open(blessing.path) as f:
        verdict = json.load(f)
    result = runtime.export(
        model.path, export_base, serving_model_name=serving_model_name,
        blessed=bool(verdict["blessed"]), blessing_reason=verdict.get("reason", ""),
        version=version or None)
    record = {"exported": result.exported, "path": result.path, "version": result.version,
              "reason": result.reason}
    with open(export.path, "w") as f:
        json.dump(record, f)
    export.metadata.update({k: v for k, v in record.items() if v is not None})
    outputs = namedtuple("ExportOutputs", ["exported", "export_path"])
    return outputs(result.exported, result.path or "")
