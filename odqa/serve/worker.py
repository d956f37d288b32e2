"""One thread owns the pipeline: requests queue for it, and the questions waiting together (same k and retriever)
are answered by one `Pipeline.ask_batch` call, so their linking, retrieval and reading share batches.

The models and their caches are never touched by two threads at once, which is what keeps the shared state
whole; the event loop only waits on futures, so /health and the page stay quick while a batch is read."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from odqa.pipeline import Pipeline, Result

ASK, SEARCH, LINK, CALL = "ask", "search", "link", "call"


class QueueFull(Exception):
    """More requests wait than the server's max_queue."""


@dataclass
class Job:
    kind: str
    question: str = ""
    k: int | None = None
    retriever: str | None = None
    call: Callable[[Pipeline], Any] | None = None  # CALL: any function of the pipeline (warm-up, /info)
    future: Future = field(default_factory=Future)
    queued: float = field(default_factory=time.perf_counter)

    @property
    def batch_key(self) -> tuple | None:
        return (self.k, self.retriever) if self.kind == ASK else None


@dataclass
class Answered:
    """An /ask result with what the queue did to it: seconds waited before its batch started, the batch's size."""

    result: Result
    waited: float
    batch_size: int


class PipelineWorker:
    def __init__(self, pipeline: Pipeline, max_batch: int = 16, max_queue: int = 256):
        self.pipeline = pipeline
        self.max_batch, self.max_queue = max_batch, max_queue
        self._pending: collections.deque[Job] = collections.deque()
        self._ready = threading.Condition()
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="odqa-pipeline", daemon=True)
        self.batches: collections.Counter[int] = collections.Counter()  # batch size -> how many were read (/info)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Answer what is queued, then end the thread."""
        with self._ready:
            self._closing = True
            self._ready.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def submit(self, job: Job) -> Future:
        with self._ready:
            if self._closing:
                raise QueueFull("the server is shutting down")
            if len(self._pending) >= self.max_queue:
                raise QueueFull(f"{len(self._pending)} requests are waiting already")
            self._pending.append(job)
            self._ready.notify()
        return job.future

    def ask(self, question: str, k: int | None, retriever: str | None) -> Future:
        return self.submit(Job(ASK, question, k, retriever))

    def ask_many(self, questions: list[str], k: int | None, retriever: str | None) -> list[Future]:
        """Queue several questions at once (POST /ask/batch): all of them or, where the queue has no room for
        all, none (QueueFull). Waiting together, they are read in batches of up to max_batch."""
        jobs = [Job(ASK, question, k, retriever) for question in questions]
        with self._ready:
            if self._closing:
                raise QueueFull("the server is shutting down")
            if len(self._pending) + len(jobs) > self.max_queue:
                raise QueueFull(f"{len(self._pending)} requests are waiting already, no room for {len(jobs)} more")
            self._pending.extend(jobs)
            self._ready.notify()
        return [job.future for job in jobs]

    def search(self, question: str, k: int | None, retriever: str | None) -> Future:
        return self.submit(Job(SEARCH, question, k, retriever))

    def link(self, question: str) -> Future:
        return self.submit(Job(LINK, question))

    def call(self, function: Callable[[Pipeline], Any]) -> Future:
        return self.submit(Job(CALL, call=function))

    # ---- the pipeline's thread ----------------------------------------------------------------------------
    def _take(self) -> list[Job]:
        with self._ready:
            while not self._pending and not self._closing:
                self._ready.wait()
            if not self._pending:
                return []
            first = self._pending.popleft()
            batch = [first]
            kept: collections.deque[Job] = collections.deque()
            if first.batch_key is not None:
                while self._pending:
                    job = self._pending.popleft()
                    if len(batch) < self.max_batch and job.batch_key == first.batch_key:
                        batch.append(job)
                    else:
                        kept.append(job)
                self._pending = kept
            return batch

    def _run(self) -> None:
        while batch := self._take():
            batch = [job for job in batch if job.future.set_running_or_notify_cancel()]
            if batch:
                self._answer(batch)

    def _answer(self, batch: list[Job]) -> None:
        started = time.perf_counter()
        first = batch[0]
        try:
            if first.kind == ASK:
                results = self.pipeline.ask_batch([job.question for job in batch], k=first.k, retriever=first.retriever)
                self.batches[len(batch)] += 1
                for job, result in zip(batch, results):
                    job.future.set_result(Answered(result, started - job.queued, len(batch)))
            elif first.kind == SEARCH:
                first.future.set_result(
                    self.pipeline.retrieve([first.question], [[]], k=first.k, retriever=first.retriever)[0]
                )
            elif first.kind == LINK:
                first.future.set_result(self.pipeline.link([first.question])[0])
            else:
                assert first.call is not None  # a CALL job carries its function
                first.future.set_result(first.call(self.pipeline))
        except Exception as exc:
            if len(batch) > 1:
                # one question must not fail the others it happened to arrive with: each alone, once more
                for job in batch:
                    self._answer([job])
                return
            first.future.set_exception(exc)
