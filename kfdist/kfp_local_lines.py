"""What kfp.local prints about a run's tasks, as `run_console` recognises it: its log records'
prefix, a task started, finished, cached, skipped, its outputs, and the ANSI colours it adds."""

import re

ANSI = re.compile(r"\x1b\[[0-9;]*m")
RECORD_PREFIX = re.compile(r"^\d\d:\d\d:\d\d\.\d+ - [A-Z]+ - ")
STARTED = re.compile(r"Executing task '(?P<task>[^']+)'")
FINISHED = re.compile(r"Task '(?P<task>[^']+)' finished with status (?P<status>\w+)")
OUTPUTS = re.compile(r"Task '(?P<task>[^']+)' outputs:")
CACHE_HIT = re.compile(r"Task '?(?P<task>[\w-]+)'? cache hit")
CONDITION_SKIPPED = re.compile(r"Skipping conditional task (?P<task>\S+)")
NO_OUTPUTS = re.compile(r"Task '(?P<task>[^']+)' has no outputs")
UPSTREAM_FAILED = re.compile(r"Skipping task (?P<task>[\w-]+): upstream")
OUTPUT_PARAM = re.compile(r"^ {4}(?P<key>\w+): (?P<value>.*)$")
OUTPUT_ARTIFACT = re.compile(r"^ {4}(?P<key>\w+): \w+\( name=")
ARTIFACT_METADATA = re.compile(r"metadata=(?P<metadata>\{.*\}) \)$")
RULE = re.compile(r"^-{20,}$")
