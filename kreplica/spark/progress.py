"""A rich progress bar of a Spark job group's completed tasks, from Spark's status tracker.

Theory of operation.  The driver's thread that submits the sweep blocks inside
each Spark action, so a second driver thread polls
``SparkContext.statusTracker()`` every ``interval_s``: the jobs of the sweep's
job group, their stages, and each stage's completed and total task counts.
The tracker forgets old jobs (``spark.ui.retainedJobs``), so the last figures
seen for every job are kept here and summed.  Before a job starts its tasks are
not known; the caller gives an estimate per job still to come (``expect_tasks``)
so the bar's total is right from the start.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class TaskCounts:
    completed: int
    total: int
    failed: int
    active: int


class TaskTracker:
    """Completed/total tasks of every job in one job group, remembered across polls."""

    def __init__(self, sc: Any, group: str) -> None:
        self.tracker = sc.statusTracker()
        self.group = group
        # job id -> stage id -> (completed, total, failed, active), the last seen.
        self._jobs: dict[int, dict[int, tuple[int, int, int, int]]] = {}
        self._finished: set[int] = set()

    def poll(self) -> TaskCounts:
        for job_id in self.tracker.getJobIdsForGroup(self.group):
            info = self.tracker.getJobInfo(job_id)
            if info is None:
                continue
            stages = self._jobs.setdefault(job_id, {})
            if str(info.status) in ("SUCCEEDED", "FAILED"):
                self._finished.add(job_id)
            for stage_id in info.stageIds:
                stage = self.tracker.getStageInfo(stage_id)
                if stage is not None:
                    stages[stage_id] = (stage.numCompletedTasks, stage.numTasks,
                                        stage.numFailedTasks, stage.numActiveTasks)
        completed = total = failed = active = 0
        for job_id, stages in self._jobs.items():
            job_completed = sum(c for c, _, _, _ in stages.values())
            # A finished job's stages that never ran were skipped (their shuffle output was
            # reused, or adaptive execution replanned them): they are not work left to do.
            job_total = job_completed if job_id in self._finished else sum(t for _, t, _, _ in stages.values())
            completed, total = completed + job_completed, total + job_total
            failed += sum(f for _, _, f, _ in stages.values())
            active += sum(a for _, _, _, a in stages.values())
        return TaskCounts(completed, total, failed, active)

    @property
    def jobs_seen(self) -> int:
        return len(self._jobs)


class SparkProgress:
    """A context manager showing a rich bar of the group's tasks until it exits.

    ``expect_jobs`` and ``expect_tasks`` (per job) size the bar before the jobs
    exist; call :meth:`note` to change the description from the driver thread.
    """

    def __init__(self, sc: Any, group: str, *, expect_jobs: int, expect_tasks: int,
                 description: str = "sweep", console: Any = None, interval_s: float = 0.25,
                 transient: bool = False) -> None:
        self.tracker = TaskTracker(sc, group)
        self.expect_jobs = expect_jobs
        self.expect_tasks = expect_tasks
        self.description = description
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._console = console
        self._transient = transient
        self._progress: Any = None
        self._task: Any = None
        self.last = TaskCounts(0, 0, 0, 0)

    def __enter__(self) -> "SparkProgress":
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeElapsedColumn, TimeRemainingColumn)

        self._progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("tasks"), TextColumn("{task.fields[extra]}"),
            TimeElapsedColumn(), TimeRemainingColumn(),
            console=self._console, transient=self._transient,
        )
        self._progress.start()
        self._task = self._progress.add_task(self.description, total=self._total(self.last), extra="")
        self._thread = threading.Thread(target=self._loop, name="kreplica-spark-progress", daemon=True)
        self._thread.start()
        return self

    def _total(self, counts: TaskCounts) -> int:
        still_to_come = max(0, self.expect_jobs - self.tracker.jobs_seen)
        return counts.total + still_to_come * self.expect_tasks

    def refresh(self) -> TaskCounts:
        self.last = counts = self.tracker.poll()
        extra = f"({counts.active} running, {counts.failed} failed)" if counts.failed else \
            f"({counts.active} running)"
        self._progress.update(self._task, completed=counts.completed, total=self._total(counts),
                              description=self.description, extra=extra)
        return counts

    def note(self, description: str) -> None:
        self.description = description

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.refresh()

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.refresh()
        self._progress.stop()
