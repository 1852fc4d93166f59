"""Reading what a command printed with ``--json``: the document, checked against the shipped
JSON Schema (``simcore/report/schema/sgdsim-output.schema.json``) every time a test reads one."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import jsonschema

from simcore.report.output import schema_text


@cache
def _validator() -> jsonschema.protocols.Validator:
    schema = json.loads(schema_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)  # the schema itself is valid JSON Schema (2020-12)
    return cls(schema)


def output(text: str) -> dict[str, Any]:
    """The document ``text`` holds, after checking it against the schema."""
    doc: dict[str, Any] = json.loads(text)
    _validator().validate(doc)
    return doc


def point(text: str) -> dict[str, Any]:
    """The one point of a document with one point."""
    (only,) = output(text)["points"]
    return dict(only)
