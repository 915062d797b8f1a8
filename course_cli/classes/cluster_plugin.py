"""The Dask worker plugin that hands every worker the client's reference (imported only with --scheduler).

Registered once per run by `cluster.grade_on_cluster`: the scheduler keeps it and gives it to every worker,
including one that joins or is restarted mid-batch, whose `setup` puts the reference in the worker's memory
(`SHIPPED` here): never in Dask's data store, so never spilled to disk or lost with another worker.
"""

from __future__ import annotations

from distributed.diagnostics.plugin import WorkerPlugin


SHIPPED: dict[tuple[str, str], object] = {}  # (lesson id, key) -> the client's Reference, on this worker


class ReferencePlugin(WorkerPlugin):
    idempotent = True  # registering it again (the same run, the same key) changes nothing

    def __init__(self, lesson_id: str, key: str, reference):
        self.lesson_id, self.key, self.reference = lesson_id, key, reference
        self.name = f"attention-course-reference-{lesson_id}-{key}"

    def setup(self, worker) -> None:
        SHIPPED[(self.lesson_id, self.key)] = self.reference

    def teardown(self, worker) -> None:
        SHIPPED.pop((self.lesson_id, self.key), None)
