"""The sweep spec: a base train config, a grid of dotted config keys, repeats and a step budget.

Provides :class:`SpecError`, :func:`load_spec` (a JSON file) and :func:`resolve_spec` (a dict),
which validate the spec and return a :class:`Spec`: its name, grid keys and the list of
:class:`Run` (a readable, filesystem-safe run id, the grid values of the run and its complete,
validated train config).  Every run's config is resolved here, so a bad value anywhere in the
grid is reported before anything starts.

A spec (JSON)::

    {"name": "mlp-policies",
     "base": {... a train config ...}            or  {"config": "path/to/train.json"},
     "grid": {"precision.policy": ["O2", "bf16"], "scaler.type": ["none", "dynamic"],
              "seed": [0, 1, 2]},
     "repeat": 1,
     "steps": 300}

* ``grid`` maps dotted keys of the train config (``optimizer.lr``, ``model.hidden``, ``seed``)
  to non-empty lists of values; the runs are every combination, in the order the keys and values
  are written (the last key varies fastest).
* ``repeat`` R (default 1) runs every grid point with the seeds s, s+1, ..., s+R-1, s being the
  base config's seed; it cannot be combined with a ``seed`` grid key.
* ``steps`` (optional) overrides ``budget.steps`` of every run, like ``mpemu train --steps``.
* A relative ``base.config`` path is read relative to the spec file's folder.

Run ids name the grid values by the last part of their key, or by the section where that part
is "type" or "name" (``policy=O2,scaler=dynamic,seed=1``; the whole dotted key where two keys
would get the same name), lists joined with "-"; characters other
than letters, digits and ``._+-`` become "_", and an id that would collide with another
(case-insensitively) or exceed 200 characters gets "~" and a short hash of its values appended.

Imports the standard library and models.config / models.schema only.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import itertools
import json
import os
import re
from dataclasses import dataclass, field

from .config import _MODEL_COMMON, MODEL_SCHEMA, SCHEMA, resolve_config
from .schema import ConfigError, Field, check_section

__all__ = ["Run", "Spec", "SpecError", "config_keys", "load_spec", "resolve_spec", "run_ids",
           "short_names"]


class SpecError(ConfigError):
    """An invalid sweep spec; the message names the spec key (``grid.seed[1]``) at fault."""


_SPEC_SCHEMA = {"name": Field(str, None, nullable=True),
                "base": None, "grid": None,
                "repeat": Field(int, 1, minimum=1),
                "steps": Field(int, None, nullable=True, minimum=1)}
_MAX_ID = 200   # well under the 255-byte file name limit of common file systems
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]")
_GENERIC = ("type", "name")    # "scaler.type" reads better as "scaler"


@dataclass(frozen=True)
class Run:
    """One run of the grid: its id, its grid values (dotted key -> value) and resolved config."""

    id: str
    values: dict
    config: dict


@dataclass
class Spec:
    """A validated spec: the raw base config and grid, and every run."""

    name: str
    base: dict
    grid: dict
    repeat: int
    steps: int | None
    runs: list = field(default_factory=list)

    @property
    def keys(self):
        """The grid keys of every run's values, "seed" last when ``repeat`` adds it."""
        return list(self.grid) + (["seed"] if self.repeat > 1 else [])

    def to_dict(self):
        """What is stored beside the results (DIR/sweep.json)."""
        return {"name": self.name, "base": self.base, "grid": self.grid, "repeat": self.repeat,
                "steps": self.steps, "keys": self.keys,
                "runs": [{"id": r.id, "values": r.values} for r in self.runs]}


def config_keys():
    """Every dotted key a grid may vary -> its Field (None where model types disagree)."""
    out = {}

    def walk(section, prefix):
        for key, spec in section.items():
            if isinstance(spec, dict):
                walk(spec, f"{prefix}{key}.")
            elif isinstance(spec, Field):
                out[prefix + key] = spec

    walk(SCHEMA, "")
    model = dict(_MODEL_COMMON)
    for fields in MODEL_SCHEMA.values():
        for key, spec in fields.items():
            model[key] = spec if model.get(key, spec) == spec else None
    out.update({f"model.{k}": v for k, v in model.items()})
    out.pop("name")     # the sweep names every run (its id)
    return out


def _read_json(path, what, where=""):
    """The JSON in file ``path``; FileNotFoundError / SpecError name ``what`` and ``where``."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{where}{what} not found: {path}")
    with open(path, encoding="utf-8") as fh:
        try:
            return json.load(fh)
        except json.JSONDecodeError as exc:
            raise SpecError(f"{where}{path}: not valid JSON: {exc}") from None


def load_spec(path):
    """Read and resolve a spec file (a relative ``base.config`` is read from its folder)."""
    path = os.fspath(path)
    raw = _read_json(path, "spec file")
    default = os.path.splitext(os.path.basename(path))[0]
    try:
        return resolve_spec(raw, root=os.path.dirname(os.path.abspath(path)),
                            default_name=default)
    except ConfigError as exc:
        raise SpecError(f"{path}: {exc}") from None


def resolve_spec(raw, *, root=None, default_name="sweep"):
    """Validate a spec dict; returns a :class:`Spec` with every run's config resolved."""
    if not isinstance(raw, dict):
        raise SpecError(f"spec must be a JSON object, got {type(raw).__name__}")
    top = check_section(raw, _SPEC_SCHEMA, "")
    base = _base(raw.get("base"), root)
    grid = _grid(raw.get("grid"))
    if top["repeat"] > 1 and "seed" in grid:
        raise SpecError("repeat: cannot be combined with a 'seed' grid key; list the seeds in "
                        "grid.seed, or drop it and let repeat number them")
    if top["steps"] is not None and "budget.steps" in grid:
        raise SpecError("steps: cannot be combined with a 'budget.steps' grid key; keep one")
    spec = Spec(name=top["name"] or default_name, base=base, grid=grid, repeat=top["repeat"],
                steps=top["steps"])
    combos = [dict(zip(grid, vals)) for vals in itertools.product(*grid.values())]
    if spec.repeat > 1:
        first = _base_seed(base)
        combos = [{**c, "seed": first + r} for c in combos for r in range(spec.repeat)]
    ids = run_ids(spec.keys, combos)
    for rid, values in zip(ids, combos):
        raw_cfg = copy.deepcopy(base)
        for key, value in values.items():
            _set(raw_cfg, key, value)
        raw_cfg["name"] = rid
        if spec.steps is not None:
            _set(raw_cfg, "budget.steps", spec.steps)
        try:
            cfg = resolve_config(raw_cfg)
        except ConfigError as exc:
            raise SpecError(f"grid: run {rid!r} is not a valid train config: {exc}") from None
        spec.runs.append(Run(rid, values, cfg))
    return spec


def _base(base, root):
    if base is None:
        raise SpecError('base: required; a train config object, or {"config": "path.json"}')
    if not isinstance(base, dict):
        raise SpecError(f"base: must be an object (a train config, or {{\"config\": "
                        f"\"path.json\"}}), got {type(base).__name__}")
    if "config" not in base:
        return copy.deepcopy(base)
    if set(base) != {"config"} or not isinstance(base["config"], str):
        raise SpecError('base: {"config": "path.json"} takes exactly one key, a path string; '
                        "write the changes to it as grid keys, or inline the whole config")
    path = base["config"]
    if root is not None and not os.path.isabs(path):
        path = os.path.join(root, path)
    loaded = _read_json(path, "file", "base.config: ")
    if not isinstance(loaded, dict):
        raise SpecError(f"base.config: {path}: must hold a JSON object")
    return loaded


def _grid(grid):
    if not isinstance(grid, dict) or not grid:
        got = "an empty object" if grid == {} else f"{type(grid).__name__} {grid!r}"
        raise SpecError("grid: must be a non-empty object mapping dotted config keys to lists "
                        f"of values, e.g. {{\"precision.policy\": [\"O2\", \"bf16\"]}}; got {got}")
    keys = config_keys()
    out = {}
    for key, values in grid.items():
        where = f"grid.{key}"
        if key == "name":
            raise SpecError(f"{where}: the sweep names every run by its id; vary other keys")
        if key not in keys:
            if isinstance(SCHEMA.get(key), dict) or key == "model":
                raise SpecError(f"{where}: names a section; a grid key names one value, e.g. "
                                f"{key}.{_first_leaf(key, keys)}")
            raise SpecError(f"{where}: unknown key{_did_you_mean(key, keys)}; grid keys are "
                            "dotted train config keys such as precision.policy, scaler.type, "
                            "optimizer.lr, seed")
        if not isinstance(values, list):
            raise SpecError(f"{where}: must be a list of values, got {_kind(values)} {values!r}")
        if not values:
            raise SpecError(f"{where}: empty list; a grid key needs at least one value")
        fld = keys[key]
        if fld is not None:
            values = [fld.check(v, f"{where}[{i}]") for i, v in enumerate(values)]
        for i, v in enumerate(values):
            if any(_same(v, w) for w in values[:i]):
                raise SpecError(f"{where}[{i}]: {v!r} is listed twice; every value once")
        out[key] = values
    return out


def _same(a, b):
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _kind(v):
    return {bool: "boolean", int: "integer", float: "number", str: "string", dict: "object",
            type(None): "null"}.get(type(v), type(v).__name__)


def _first_leaf(prefix, keys):
    return next(k[len(prefix) + 1:] for k in keys if k.startswith(prefix + "."))


def _did_you_mean(key, keys):
    hint = difflib.get_close_matches(key, list(keys), n=1)
    if not hint:    # "policy" -> "precision.policy": match the last part alone
        last = {k.rsplit(".", 1)[-1]: k for k in keys}
        near = difflib.get_close_matches(key.rsplit(".", 1)[-1], list(last), n=1)
        hint = [last[near[0]]] if near else []
    return f" (did you mean {hint[0]!r}?)" if hint else ""


def _base_seed(base):
    seed = base.get("seed", SCHEMA["seed"].default)
    return SCHEMA["seed"].check(seed, "base.seed")


def _set(cfg, key, value):
    """cfg[a][b] = value for key "a.b", creating the sections on the way."""
    *path, last = key.split(".")
    node, where = cfg, "base"
    for part in path:
        where += f".{part}"
        if node.get(part) is None:
            node[part] = {}
        if not isinstance(node[part], dict):
            raise SpecError(f"{where}: must be an object to take grid key {key!r}, got "
                            f"{_kind(node[part])}")
        node = node[part]
    node[last] = copy.deepcopy(value)


def _fmt(value):
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "-".join(_fmt(v) for v in value)
    return json.dumps(value)    # numbers as repr, true/false/null


def short_names(keys):
    """What run ids and tables call the grid keys: the last part of the key, or the section
    for a generic last part ("scaler.type" -> "scaler"); the whole key where two coincide."""
    parts = [k.split(".") for k in keys]
    short = [p[-2] if len(p) > 1 and p[-1] in _GENERIC else p[-1] for p in parts]
    return [s if short.count(s) == 1 else k for k, s in zip(keys, short)]


def run_ids(keys, combos):
    """Readable, filesystem-safe, unique ids for the value combinations (see the docstring)."""
    names = short_names(keys)
    ids = [",".join(f"{n}={_UNSAFE.sub('_', _fmt(c[k]))}" for n, k in zip(names, keys))
           for c in combos]
    folded = [i.lower() for i in ids]
    for j, (rid, combo) in enumerate(zip(ids, combos)):
        if folded.count(rid.lower()) > 1 or len(rid) > _MAX_ID:
            digest = hashlib.sha1(json.dumps([combo[k] for k in keys]).encode()).hexdigest()[:10]
            ids[j] = f"{rid[:_MAX_ID - 11]}~{digest}"
    return ids
