"""A small declarative schema for JSON configs: :class:`Field` and :func:`check_section`.

A section is a dict mapping key -> Field (a leaf) or -> dict (a nested section).  Checking a
section fills defaults, rejects unknown keys (listing the accepted ones, with a "did you mean"
hint), checks types, ranges and choices, and raises :class:`ConfigError` with the full key path.
Imports only the standard library.
"""

from __future__ import annotations

import copy
import difflib
import math
from dataclasses import dataclass

__all__ = ["ConfigError", "Field", "check_section"]


class ConfigError(ValueError):
    """An invalid configuration; the message starts with the offending key path."""


_TYPE_NAMES = {int: "an integer", float: "a number", bool: "true or false", str: "a string",
               "list[int]": "a list of integers", "list[float]": "a list of numbers"}


@dataclass(frozen=True)
class Field:
    """One config value: its type, default and constraints."""

    type: object
    default: object = None
    choices: tuple | None = None
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    nullable: bool = False
    required: bool = False
    length: int | None = None

    def check(self, value, path):
        if value is None:
            if self.nullable:
                return None
            raise ConfigError(f"{path}: must be {_TYPE_NAMES[self.type]}, got null")
        if self.type in ("list[int]", "list[float]"):
            if not isinstance(value, list):
                raise ConfigError(f"{path}: must be {_TYPE_NAMES[self.type]}, got "
                                  f"{_json_type(value)} {value!r}")
            if self.length is not None and len(value) != self.length:
                raise ConfigError(f"{path}: must have exactly {self.length} elements, got "
                                  f"{len(value)}")
            elem = int if self.type == "list[int]" else float
            return [self._scalar(v, f"{path}[{i}]", elem) for i, v in enumerate(value)]
        return self._scalar(value, path, self.type)

    def _scalar(self, value, path, typ):
        if typ is bool:
            ok = isinstance(value, bool)
        elif typ is int:
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif typ is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            if ok:
                value = float(value)
                if not math.isfinite(value):
                    raise ConfigError(f"{path}: must be finite, got {value!r}")
        else:
            ok = isinstance(value, typ)
        if not ok:
            raise ConfigError(f"{path}: must be {_TYPE_NAMES[typ]}, got {_json_type(value)} "
                              f"{value!r}")
        if self.choices is not None and value not in self.choices:
            raise ConfigError(f"{path}: {value!r} is not accepted; accepted values: "
                              + ", ".join(repr(c) for c in self.choices))
        if self.minimum is not None and (
                value < self.minimum or (self.exclusive_minimum and value == self.minimum)):
            op = ">" if self.exclusive_minimum else ">="
            raise ConfigError(f"{path}: must be {op} {self.minimum}, got {value!r}")
        if self.maximum is not None and value > self.maximum:
            raise ConfigError(f"{path}: must be <= {self.maximum}, got {value!r}")
        return value


def _json_type(value):
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "list",
            dict: "object", type(None): "null"}.get(type(value), type(value).__name__)


def check_section(raw, schema, path):
    """Validate dict ``raw`` against ``schema``; returns a new dict with every key filled.

    A schema value of None means "present in the output, checked elsewhere" (passed through).
    """
    where = path or "config"
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: must be an object, got {_json_type(raw)}")
    unknown = sorted(k for k in raw if k not in schema)
    if unknown:
        key = unknown[0]
        hint = difflib.get_close_matches(key, list(schema), n=1)
        did = f" (did you mean {hint[0]!r}?)" if hint else ""
        raise ConfigError(f"{_join(path, key)}: unknown key{did}; accepted keys in {where}: "
                          + ", ".join(sorted(schema)))
    out = {}
    for key, spec in schema.items():
        sub = _join(path, key)
        if spec is None:
            out[key] = copy.deepcopy(raw.get(key))
        elif isinstance(spec, dict):
            out[key] = check_section(raw.get(key), spec, sub)
        elif key in raw:
            out[key] = spec.check(raw[key], sub)
        elif spec.required:
            accepted = ""
            if spec.choices:
                accepted = "; accepted values: " + ", ".join(repr(c) for c in spec.choices)
            raise ConfigError(f"{sub}: required{accepted}")
        else:
            out[key] = copy.deepcopy(spec.default)
    return out


def _join(path, key):
    return f"{path}.{key}" if path else key
