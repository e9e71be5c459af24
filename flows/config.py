"""Loading and hashing release configs (YAML -> validated ReleaseConfig)."""

from __future__ import annotations

import datetime
import difflib
import hashlib
import json
import shutil
import typing
from pathlib import Path
from typing import Any

import yaml
from fdp.flows.registry import SUMMARIES
from fdp.schemas.config import series_name
from pydantic import BaseModel, ValidationError

from fdpcore.errors import ConfigError, LedgerError
from fdpcore.ledger import EmptyLedgerFileError, Ledger, check_ledger_directory, sqlite_ledger_file
from fdpcore.limits import MAX_CONFIG_BYTES, MAX_CONFIG_JSON_BYTES, MAX_LIST_LENGTH, MAX_TEXT_LENGTH

__all__ = ["DEFAULT_CRON", "check_cron", "config_sha256", "format_validation_error", "load_config", "precheck_budget",
           "series_name"]

#: Schedule of ``fdp serve`` deployments (:mod:`fdp.flows.scheduled`): 06:00 UTC on the first day of every month.
DEFAULT_CRON = "0 6 1 * *"
#: The largest value of each cron field (minute, hour, day of month, month, day of week): a step above it fires at 0 only.
_CRON_FIELDS = (("minute", 59), ("hour", 23), ("day of month", 31), ("month", 12), ("day of week", 7))
#: How far ahead ``check_cron`` looks for a first run.
_CRON_HORIZON_YEARS = 5


class _NoAliasLoader(yaml.SafeLoader):
    """YAML's safe loader without aliases or repeated keys.

    An alias (``*name``) is refused where it appears, before anything is expanded: it repeats a node without
    repeating its text, so a few lines can expand to gigabytes (a "billion laughs" bomb); an fdp config has no
    need for them. A key written twice in one mapping is refused too, naming the key and both lines: YAML loaders
    keep the last one silently, so a second ``privacy:`` block pasted below the first would change the epsilon
    that is charged.
    """

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, Any] = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.setdefault(key, key_node.start_mark)
                except TypeError:  # an unhashable key: SafeLoader's own error names it
                    continue
                if first is not key_node.start_mark:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"the key {key!r} appears twice in one mapping (first at line {first.line + 1}); "
                        "YAML would keep only the last, so remove or merge one of them", key_node.start_mark)
        return super().construct_mapping(node, deep=deep)

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.get_event()
            raise yaml.composer.ComposerError(
                None, None, f"aliases (*{event.anchor}) are not allowed in an fdp config; write the value out",
                event.start_mark)
        return super().compose_node(parent, index)


def _read_bounded(p: Path) -> str:
    """The config's text, refusing more than :data:`MAX_CONFIG_BYTES` before reading further (``/dev/zero``)."""
    with p.open("rb") as fh:
        data = fh.read(MAX_CONFIG_BYTES + 1)
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"config file {str(p)!r} is larger than {MAX_CONFIG_BYTES // 1024} KiB, the limit of an fdp "
                          "config; is it the right file?")
    return data.decode("utf-8")


def _check_sizes(node: Any, where: str, name: str) -> None:
    """Refuse text longer than :data:`MAX_TEXT_LENGTH` and lists longer than :data:`MAX_LIST_LENGTH`, naming the field."""
    if isinstance(node, str) and len(node) > MAX_TEXT_LENGTH:
        raise ConfigError(f"{name}: invalid config\n  {where}: text of {len(node)} characters; at most "
                          f"{MAX_TEXT_LENGTH} are allowed")
    if isinstance(node, list):
        if len(node) > MAX_LIST_LENGTH:
            raise ConfigError(f"{name}: invalid config\n  {where}: a list of {len(node)} entries; at most "
                              f"{MAX_LIST_LENGTH} are allowed")
        for i, item in enumerate(node):
            _check_sizes(item, f"{where}.{i}", name)
    if isinstance(node, dict):
        for key, item in node.items():
            _check_sizes(key, f"{where}.(a key)" if where else "(a key)", name)
            _check_sizes(item, f"{where}.{key}" if where else str(key), name)


def load_config(path: str | Path) -> Any:
    """Read and validate a YAML release config; errors name the file and the field.

    The config's ``summary`` (default ``"mean"``) selects its model in :data:`fdp.flows.registry.SUMMARIES`.
    Limits (:mod:`fdpcore.limits`): the file at most :data:`~fdpcore.limits.MAX_CONFIG_BYTES`, no YAML
    aliases, text values and lists bounded, and the validated config's JSON form small enough to be a
    Prefect flow-run parameter.
    """
    p = Path(path)
    try:
        text = _read_bounded(p)
    except FileNotFoundError:
        raise ConfigError(f"config file {str(p)!r} does not exist") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {str(p)!r} is not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"config file {str(p)!r} cannot be read ({exc.strerror}); check the path and its permissions") from None
    try:
        raw = yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ConfigError(f"{p.name}: not valid YAML{where} ({str(exc).splitlines()[0]})") from None
    except RecursionError:
        raise ConfigError(f"{p.name}: not valid YAML (nested too deeply)") from None
    except ValueError:  # e.g. an integer literal with more digits than Python converts
        raise ConfigError(f"{p.name}: not valid YAML (a number has too many digits)") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{p.name}: the config must be a YAML mapping (key: value lines), not {type(raw).__name__}")
    try:
        _check_sizes(raw, "", p.name)
    except RecursionError:
        raise ConfigError(f"{p.name}: invalid config (a value is nested too deeply)") from None
    summary = raw.get("summary", "mean")
    if not isinstance(summary, str) or summary not in SUMMARIES:
        raise ConfigError(f"{p.name}: invalid config\n  summary: {summary!r} must be one of {sorted(SUMMARIES)}")
    try:
        config = SUMMARIES[summary].config_model.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"{p.name}: invalid config\n{format_validation_error(exc, SUMMARIES[summary].config_model)}"
                          ) from None
    except RecursionError:
        raise ConfigError(f"{p.name}: invalid config (a value is nested too deeply)") from None
    size = len(config.model_dump_json())
    if size > MAX_CONFIG_JSON_BYTES:
        raise ConfigError(f"{p.name}: invalid config (its JSON form is {size // 1024} KiB; at most "
                          f"{MAX_CONFIG_JSON_BYTES // 1024} KiB fit a Prefect flow-run parameter)")
    return config


def format_validation_error(exc: ValidationError, model: type[BaseModel] | None = None) -> str:
    """One line per field: ``  field.path: message``.

    A field that accepts one of several forms (e.g. ``tau``: a number > 0 or ``'auto'``) fails once per form;
    pydantic names each form in the location (``constrained-float``, ``literal['auto']``). Those names are
    dropped and the field's messages joined with "or", so the line reads as the field's rule. With the validated
    ``model``, a key it does not know gets the closest key it does know (trial Y: ``value_ofset`` said only "Extra
    inputs are not permitted").
    """
    fields: dict[str, list[str]] = {}
    for err in exc.errors():
        path = [str(x) for x in err["loc"]]
        cut = next((i for i, part in enumerate(path) if _is_form_name(part)), len(path))
        loc = ".".join(path[:cut]) or "(top level)"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden" and model is not None:
            msg += _did_you_mean(model, [x for x in err["loc"] if isinstance(x, str)])
        if msg not in fields.setdefault(loc, []):
            fields[loc].append(msg)
    return "\n".join(f"  {loc}: {' — or: '.join(msgs)}" for loc, msgs in fields.items())


def _did_you_mean(model: type[BaseModel], path: list[str]) -> str:
    """`` (did you mean 'x'?)`` for the last key of ``path`` among the keys its parent model knows, else ``""``."""
    models: list[type[BaseModel]] = [model]
    for part in path[:-1]:
        fields = [m.model_fields[part] for m in models if part in m.model_fields]
        models = [m for f in fields for m in _models_in(f.annotation)]
    known = sorted({name for m in models for name in m.model_fields})
    close = difflib.get_close_matches(path[-1], known, n=1, cutoff=0.75) if path else []
    return f" (did you mean {close[0]!r}?)" if close else ""


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation can hold (through Optional, unions, lists and Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def _is_form_name(part: str) -> bool:
    """Whether a location part names a union member (``constrained-float``, ``literal['auto']``), not a field."""
    return part in ("float", "int", "str", "bool", "list", "dict", "tuple") or any(c in part for c in "-[(")


#: Config fields added after releases existed, as paths (``*``: every item of a list): the ``release:`` block (release
#: series) and a FoSR covariate's plan-only ``shares`` (session 30). :func:`config_sha256` leaves them out while absent.
ADDED_LATER = (("release",), ("covariates", "*", "shares"))


def _nodes(data: Any, path: list[str]) -> list[Any]:
    """The nodes of ``data`` at ``path`` (``*`` steps into every item of a list); none where the path does not exist."""
    nodes = [data]
    for step in path:
        nodes = [x for node in nodes for x in (node if step == "*" and isinstance(node, list) else
                                              [node.get(step)] if isinstance(node, dict) else [])]
    return nodes


def config_sha256(config: BaseModel) -> str:
    """SHA-256 of the canonical JSON of a validated config (public; identifies the release definition).

    A field added after releases were published (:data:`ADDED_LATER`) is left out while absent, so configs written
    before it keep their hash (and their published releases stay idempotent).
    """
    data = config.model_dump(mode="json")
    for *parents, name in ADDED_LATER:
        for node in _nodes(data, parents):
            if isinstance(node, dict) and name in node and node[name] is None:
                del node[name]
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def precheck_budget(url: str, config: Any, release_id: str, period: str | None) -> None:
    """Read-only: refuse a charge the budget cannot cover before any work; the atomic charge still decides.

    ``fdp release`` (exit 3) and every scheduled run call it before the data are read, so a month whose allowance
    is spent costs no read and no plan per tick (trial Q, F4). A SQLite ledger that does not exist yet is not
    created here (the first charge creates it).

    Raises:
        LedgerURLError: a SQLite ledger in a directory that does not exist (not fdp's state directory).
        BudgetExceededError: the config's epsilon/delta do not fit the total or the period's allowance.
        NotResumableError: the id drew its noise and was not published (a live run may be publishing it).
        ReleaseConflictError: the id was used with another config.
        LedgerIntegrityError: the ledger's audit trail does not verify (a new charge only).
    """
    path = sqlite_ledger_file(url)
    if path is not None:
        if not path.exists():
            check_ledger_directory(str(path))  # a mistyped directory: exit 2 now, before Prefect starts (trial R)
        if path.parent.is_dir():  # (fdp's own state directory is made by the first charge)
            check_ledger_free_space(url, path)
        if not path.exists():
            return
    try:
        ledger = Ledger(url, read_only=True)
    except EmptyLedgerFileError:
        raise  # never a ledger fdp wrote: refused before Prefect starts (trial U, H1)
    except LedgerError:
        return  # e.g. an older schema: the release's own opening migrates it (or says what is wrong)
    proposal = config.budget
    new = ledger.precheck(release_id=release_id, dataset_id=config.dataset.id, epsilon=config.privacy.epsilon,
                          delta=config.privacy.delta, config_sha256=config_sha256(config), period=period,
                          proposal={"epsilon": proposal.epsilon, "delta": proposal.delta, **proposal.policy()})
    if new:  # a damaged trail is refused before the data are read and Prefect starts (trial Y); the charge re-checks
        try:
            writable = Ledger(url)
        except LedgerError:
            return  # e.g. a read-only file: the charge says what is wrong
        writable.check_integrity()


#: Free bytes a SQLite ledger's filesystem must have before a charge: a release records its public outputs in the ledger
#: after the noise (about 70 KB for a 48-point mean curve, megabytes for a large surface).
LEDGER_FREE_BYTES = 16 * 2**20


def check_ledger_free_space(url: str, path: Path) -> None:
    """Refuse a charge when the SQLite ledger's filesystem is nearly full (exit 1, nothing charged; trial U, M2).

    With 32-64 KiB free the charge fitted and the record of the published outputs did not: the release was left
    noised, its epsilon spent and nothing published. :data:`LEDGER_FREE_BYTES` is ample for any release fdp makes.
    """
    free = shutil.disk_usage(path.parent).free
    if free < LEDGER_FREE_BYTES:
        raise LedgerError(
            f"ledger {url}: only {free / 2**20:.3g} MiB free where it lives; a release records its public outputs in the "
            f"ledger after the noise (about 70 KB for a mean curve, megabytes for a large surface), so with less than "
            f"{LEDGER_FREE_BYTES // 2**20} MiB the charge could go through and the release be lost (its epsilon spent, "
            "nothing published); free space there, then run again — nothing was charged")


def check_cron(cron: str, now: datetime.datetime | None = None) -> datetime.datetime:
    """The first time ``cron`` fires after ``now`` (UTC), read as Prefect's scheduler reads it; refuse what never fires.

    A :class:`ConfigError` (exit 2) names the problem: not five fields (or an ``@`` macro), a field Prefect's cron
    parser refuses, a step larger than its field's range (``*/61`` in the minute field fires only at minute 0), or no
    match within five years (``0 6 31 2 *``: 31 February). Without this, ``fdp serve`` served a series that never runs
    (trial I).

    >>> check_cron("0 6 1 * *", datetime.datetime(2026, 11, 26, tzinfo=datetime.timezone.utc)).isoformat()
    '2026-12-01T06:00:00+00:00'
    >>> check_cron("0 6 31 2 *")
    Traceback (most recent call last):
    ...
    fdpcore.errors.ConfigError: --cron '0 6 31 2 *' never fires (no time matches it within 5 years): check the day of month against the month
    """
    from prefect._vendor.croniter import CroniterBadDateError, croniter  # the parser of Prefect's scheduler

    example = "five fields, minute hour day-of-month month day-of-week, in UTC: e.g. '0 6 1 * *' is 06:00 on the 1st"
    fields = cron.split()
    if not (len(fields) == 5 or (len(fields) == 1 and fields[0].startswith("@"))) or not croniter.is_valid(cron):
        raise ConfigError(f"--cron {cron!r} is not a cron schedule ({example})")
    for (name, top), field in zip(_CRON_FIELDS, fields if len(fields) == 5 else (), strict=False):
        for part in field.split(","):
            step = part.partition("/")[2]
            if step.isdigit() and int(step) > top:
                raise ConfigError(f"--cron {cron!r}: the step /{step} of the {name} field is larger than its range "
                                  f"(0-{top}), so it fires only at {name} 0; {example}")
    start = (now or datetime.datetime.now(datetime.UTC)).astimezone(datetime.UTC)
    try:
        first = croniter(cron, start.replace(tzinfo=None), max_years_between_matches=_CRON_HORIZON_YEARS).get_next(
            datetime.datetime)
    except CroniterBadDateError:
        raise ConfigError(f"--cron {cron!r} never fires (no time matches it within {_CRON_HORIZON_YEARS} years): check "
                          "the day of month against the month") from None
    return first.replace(tzinfo=datetime.UTC)
