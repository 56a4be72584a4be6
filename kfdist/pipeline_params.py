"""The inputs of a compiled KFP pipeline, and command-line values checked against them.

Pure: reads a pipeline YAML, lists its declared parameters, and turns
`key=value` strings into values of the declared types, raising
`InvalidInputError` (naming the parameter and what is valid) before anything
is sent anywhere.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Any, Dict, List, Mapping, Sequence

import yaml

from kfdist.components.common.errors import InvalidInputError

_SUPPORTED_TYPES = ("STRING", "NUMBER_INTEGER", "NUMBER_DOUBLE", "BOOLEAN", "LIST", "STRUCT")
_TRUE = ("true", "1", "yes", "y", "on")
_FALSE = ("false", "0", "no", "n", "off")


@dataclasses.dataclass(frozen=True)
class PipelineInput:
    """One declared parameter input of a compiled pipeline."""

    name: str
    parameter_type: str
    required: bool
    default: Any = None


# --------------------------------------------------------------------------- validation


def load_pipeline_spec(package_path: str) -> Dict[str, Any]:
    """Reads a compiled KFP pipeline YAML and returns its PipelineSpec document.

    Raises:
      InvalidInputError: If the file is missing, not YAML, or not a compiled
        KFP v2 pipeline spec.
    """
    if not package_path.endswith((".yaml", ".yml")):
        raise InvalidInputError(
            f"{package_path!r} is not a compiled pipeline YAML: the file name must end in "
            ".yaml or .yml (compile pipelines with `kfdist compile`)")
    if not os.path.isfile(package_path):
        raise InvalidInputError(f"pipeline file {package_path!r} does not exist")
    try:
        with open(package_path, "r", encoding="utf-8") as f:
            docs = [d for d in yaml.safe_load_all(f) if d is not None]
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise InvalidInputError(f"cannot read pipeline file {package_path!r}: {err}") from None
    spec = docs[0] if docs else None
    if (not isinstance(spec, dict) or not isinstance(spec.get("pipelineInfo"), dict)
            or not isinstance(spec.get("root"), dict)):
        raise InvalidInputError(
            f"{package_path!r} is not a compiled KFP pipeline spec (it needs top-level "
            "`pipelineInfo` and `root`; compile pipelines with `kfdist compile`)")
    from google.protobuf import json_format
    from kfp.pipeline_spec import pipeline_spec_pb2

    try:  # the same parse kfp.Client does before uploading
        json_format.ParseDict(spec, pipeline_spec_pb2.PipelineSpec())
        for extra in docs[1:]:
            json_format.ParseDict(extra, pipeline_spec_pb2.PlatformSpec())
    except (json_format.ParseError, TypeError, AttributeError) as err:
        raise InvalidInputError(
            f"{package_path!r} is not a valid KFP pipeline spec: {err}") from None
    return spec


def pipeline_inputs(spec: Mapping[str, Any]) -> Dict[str, PipelineInput]:
    """The parameter inputs the pipeline declares, by name."""
    params = ((spec.get("root") or {}).get("inputDefinitions") or {}).get("parameters") or {}
    inputs = {}
    for name, decl in params.items():
        decl = decl or {}
        has_default = "defaultValue" in decl
        inputs[name] = PipelineInput(
            name=name,
            parameter_type=decl.get("parameterType", "STRING"),
            required=not has_default and not decl.get("isOptional", False),
            default=decl.get("defaultValue"),
        )
    return inputs


def _artifact_inputs(spec: Mapping[str, Any]) -> List[str]:
    return sorted(((spec.get("root") or {}).get("inputDefinitions") or {}).get("artifacts") or {})


def parse_param_value(name: str, value: Any, parameter_type: str) -> Any:
    """Converts `value` (a command-line string, or a Python value) to `parameter_type`.

    STRING stays text; NUMBER_INTEGER becomes an int; NUMBER_DOUBLE a finite
    float; BOOLEAN accepts true/false, 1/0, yes/no, on/off; LIST and STRUCT take
    JSON (`[1, 2]`, `{"a": 1}`).

    Raises:
      InvalidInputError: If the value does not parse to the type.
    """
    def bad(what: str) -> InvalidInputError:
        return InvalidInputError(
            f"parameter {name!r} is {parameter_type} and needs {what}; got {value!r}")

    if parameter_type == "STRING":
        if not isinstance(value, str):
            raise bad("a string")
        return value
    if parameter_type == "NUMBER_INTEGER":
        if isinstance(value, bool):
            raise bad("an integer such as 4")
        if isinstance(value, int):
            return value
        if isinstance(value, str):
            try:
                return int(value.strip(), 10)
            except ValueError:
                pass
        raise bad("an integer such as 4")
    if parameter_type == "NUMBER_DOUBLE":
        number = None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            number = float(value)
        elif isinstance(value, str):
            try:
                number = float(value.strip())
            except ValueError:
                pass
        if number is None or not math.isfinite(number):
            raise bad("a finite number such as 0.5")
        return number
    if parameter_type == "BOOLEAN":
        if isinstance(value, bool):
            return value
        if isinstance(value, str):
            text = value.strip().lower()
            if text in _TRUE:
                return True
            if text in _FALSE:
                return False
        raise bad("true or false")
    if parameter_type in ("LIST", "STRUCT"):
        return _parse_json_value(value, parameter_type, bad)
    raise InvalidInputError(
        f"parameter {name!r} has type {parameter_type!r}, which kfdist submit cannot set; "
        f"supported types: {', '.join(_SUPPORTED_TYPES)}")


def _parse_json_value(value: Any, parameter_type: str, bad) -> Any:
    """A LIST or STRUCT value: JSON text, or a list/dict that JSON can carry."""
    want, what = (list, "a JSON list such as [1, 2]") if parameter_type == "LIST" else (
        dict, 'a JSON object such as {"key": 1}')
    parsed = value
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            raise bad(what) from None
    if not isinstance(parsed, want):
        raise bad(what)
    try:
        json.dumps(parsed, allow_nan=False)
    except (TypeError, ValueError):
        raise bad(what) from None
    return parsed


def parse_param_args(pairs: Sequence[str]) -> Dict[str, str]:
    """Turns `--param key=value` strings into a dict (values stay text).

    Raises:
      InvalidInputError: On a pair without `=`, an empty key or a repeated key.
    """
    params: Dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InvalidInputError(f"--param needs KEY=VALUE; got {pair!r}")
        if key in params:
            raise InvalidInputError(f"--param {key} is given more than once")
        params[key] = value
    return params


def resolve_arguments(spec: Mapping[str, Any], params: Mapping[str, Any]) -> Dict[str, Any]:
    """Checks `params` against the pipeline's declared inputs and types them.

    Returns:
      The arguments to send, converted to their declared types (inputs left
      out take their defaults on the server).

    Raises:
      InvalidInputError: On an unknown parameter (the message lists the valid
        ones), a value that does not parse to its type, or a required
        parameter left out.
    """
    inputs = pipeline_inputs(spec)
    artifacts = _artifact_inputs(spec)

    def listing() -> str:
        if not inputs:
            return "the pipeline declares no parameters"
        return "valid parameters: " + ", ".join(
            f"{i.name} ({i.parameter_type}{', required' if i.required else ''})"
            for i in sorted(inputs.values(), key=lambda i: i.name))

    unknown = sorted(k for k in params if k not in inputs)
    if unknown:
        for key in unknown:
            if key in artifacts:
                raise InvalidInputError(
                    f"{key!r} is an artifact input of the pipeline and cannot be set "
                    f"with --param; {listing()}")
        raise InvalidInputError(
            f"unknown pipeline parameter{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(map(repr, unknown))}; {listing()}")
    arguments = {k: parse_param_value(k, v, inputs[k].parameter_type) for k, v in params.items()}
    missing = sorted(i.name for i in inputs.values() if i.required and i.name not in params)
    if missing:
        raise InvalidInputError(
            "missing required pipeline parameter"
            f"{'s' if len(missing) > 1 else ''} {', '.join(missing)}: pass "
            + " ".join(f"--param {m}=..." for m in missing))
    return arguments
