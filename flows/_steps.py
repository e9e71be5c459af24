"""The steps every release flow shares, in the order that is the privacy contract (DESIGN.md).

A summary's flow reads::

    if (done := already_published(ledger_url, release_id, config_sha256, out_dir)) is not None:
        return done                                   # idempotent re-run: files from the ledger
    progress = Progress(release_id)                   # a progress artifact in the UI, stage by stage
    ...load, clip, plan (public inputs only), summarise...; progress(40, "curves aligned and clipped")
    if (done := charge(ledger_url, release_id, request, out_dir, config.budget)) is not None:
        return done                                   # published meanwhile by another run
    with cancel_unless_noised(ledger_url, release_id):
        values = <noise task, which calls mark_noised right before its first draw>
    manifest = <publish task: ledger first, then files and artifacts>
    return announce(manifest, "<summary>-release", out_dir)
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fdp.schemas import BudgetSpec, ChargeRequest
from fdp.tasks.ledger import (
    attach_flow_run,
    await_other_run,
    cancel_reservation,
    charge_budget,
    check_existing_release,
    republish_release,
)
from fdp.tasks.lineage import emit_lineage, lineage_rewritten, lineage_started
from prefect import get_run_logger
from prefect.artifacts import create_progress_artifact, update_progress_artifact

from fdpcore.errors import NotResumableError, ReleaseConflictError
from fdpcore.ledger import Ledger, owner_may_be_running, release_owner

__all__ = ["Progress", "already_published", "announce", "cancel_unless_noised", "charge", "take_rewritten"]

#: Release ids whose run in this process only re-wrote published files, with the log's note (read by ``fdp release``).
_REWRITTEN: dict[str, str] = {}


def take_rewritten(release_id: str) -> str | None:
    """The note of this process's last run of ``release_id`` if it only re-wrote published files, else None.

    ``""`` for a re-run of a published id; a note when another run published it while this one waited. Forgotten
    once read.
    """
    return _REWRITTEN.pop(release_id, None)


def already_published(ledger_url: str, release_id: str, config_sha256: str, out_dir: str) -> dict[str, Any] | None:
    """The re-written manifest when ``release_id`` is already published with this config, else None.

    Raises:
        ReleaseConflictError: the id was used with another config.
    """
    lineage_started(release_id)  # OpenLineage START of this run
    existing = check_existing_release(ledger_url, release_id)
    if existing is not None and existing.config_sha256 != config_sha256:
        raise ReleaseConflictError(
            f"release id {release_id!r} was already used with a different config; choose a new --release-id"
        )
    if existing is not None and existing.state == "published":
        attach_flow_run(ledger_url, release_id, existing.summary)
        return _rewritten(republish_release(existing, out_dir), release_id)
    return None


def _rewritten(manifest: dict[str, Any], release_id: str, note: str = "") -> dict[str, Any]:
    """A run that only re-wrote a published release's files: say so in its log, and end its lineage run (COMPLETE)."""
    get_run_logger().info("release %s: already published — files re-written, nothing charged%s", release_id, note)
    lineage_rewritten(release_id)
    _REWRITTEN[release_id] = note
    return manifest


def _noised_by_a_live_run(ledger_url: str, release_id: str, config_sha256: str) -> str | None:
    """``"noised"`` when another live run of ``release_id`` (this config) drew its noise, ``"published"``, else None.

    A run that drew the noise and is still going may be publishing it right now: it is waited for, not refused.
    """
    record = Ledger(ledger_url).get(release_id)
    if record is None or record.config_sha256 != config_sha256:
        return None
    if record.state == "published":
        return "published"
    if record.state == "noised" and owner_may_be_running(release_owner(record)):
        return "noised"
    return None


def _charge_or_wait(ledger_url: str, release_id: str, request: ChargeRequest) -> dict[str, Any]:
    """:func:`charge_budget`, unless another live run of the id already drew its noise (no charge: wait for it).

    The ledger alone refuses a noised id whoever holds it; :func:`charge` then waits for that run's outcome.
    """
    waiting = {"charged": False, "published": False}
    if _noised_by_a_live_run(ledger_url, release_id, request.config_sha256) == "noised":
        return waiting
    try:
        return charge_budget(ledger_url, release_id, request)
    except NotResumableError:  # noised between the look above and the charge: by a live run, or by one that stopped
        state = _noised_by_a_live_run(ledger_url, release_id, request.config_sha256)
        if state is None:
            raise
        return {"charged": False, "published": True} if state == "published" else waiting


def charge(
    ledger_url: str, release_id: str, request: ChargeRequest, out_dir: str, proposal: BudgetSpec
) -> dict[str, Any] | None:
    """Charge the full cost atomically; the re-written manifest if another run published the id meanwhile.

    ``proposal`` (the config's ``budget:``) creates the dataset's budget in the same transaction if the
    ledger does not know the dataset yet; a run that fails before this step leaves no trace in the ledger.
    """
    request = request.model_copy(update={"budget_proposal": proposal})
    outcome = _charge_or_wait(ledger_url, release_id, request)
    for _ in range(3):  # this id and config are reserved or noised: wait while their live run works on them
        if outcome["charged"] or outcome["published"]:
            break
        turn = await_other_run(ledger_url, release_id)
        if turn == "mine":
            break
        outcome = {"charged": False, "published": True} if turn == "published" else charge_budget(
            ledger_url, release_id, request)  # cancelled by its run before noise: charged afresh
    if not outcome["charged"]:  # a re-run (resumed reservation or published meanwhile): record it, crash stale runs
        attach_flow_run(ledger_url, release_id, request.summary)
    if outcome["published"]:
        record = check_existing_release(ledger_url, release_id)
        return _rewritten(republish_release(record, out_dir), release_id,
                          " (another run of it published it meanwhile)")
    return None


@contextmanager
def cancel_unless_noised(ledger_url: str, release_id: str) -> Iterator[None]:
    """On any failure inside, give the reservation back — which the ledger allows only before noise."""
    try:
        yield
    except BaseException:
        cancel_reservation(ledger_url, release_id)
        raise


def announce(manifest: dict[str, Any], job_name: str, out_dir: str, ledger_url: str | None = None) -> dict[str, Any]:
    """Emit the release's lineage ``COMPLETE`` event (after publication) and return its manifest."""
    emit_lineage(manifest, job_name, out_dir, ledger_url)
    return manifest


class Progress:
    """A Prefect progress artifact that follows one release through its stages (visible in the UI), and a progress line on standard error for the terminal that runs ``fdp release``.

    Descriptions name stages only — never a count or value computed from the data.
    """

    def __init__(self, release_id: str) -> None:
        self.release_id = release_id
        self.artifact_id = self._shown(create_progress_artifact, 0.0, description=f"Release {release_id}: started")

    def __call__(self, percent: float, stage: str) -> None:
        """Move the bar to ``percent`` (0-100) with a stage description."""
        if self.artifact_id is not None:
            self._shown(update_progress_artifact, self.artifact_id, percent,
                        description=f"Release {self.release_id}: {stage}")
        print(f"fdp: [{percent:3.0f}%] {self.release_id}: {stage}", file=sys.stderr, flush=True)  # the CLI's progress line

    def _shown(self, call: Any, *args: Any, **kwargs: Any) -> Any:
        """Send a progress update, best effort: the bar is for the eye, and the release must not depend on it.

        A Prefect server that fails one update (an HTTP 500 from a busy SQLite-backed server) used to fail the
        release there — at 85 %, after its noise was drawn and charged, so nothing was published and the id could not
        be resumed. Now the update is skipped with a warning and the release goes on.
        """
        try:
            return call(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - any failure of a cosmetic update; the release's own steps still raise
            print(f"fdp: warning: {self.release_id}: the Prefect server did not take a progress update "
                  f"({type(exc).__name__}); the release goes on", file=sys.stderr, flush=True)
            return None
