"""The interactive QA shell: a REPL over a Pipeline (prompt_toolkit: line editing, history across sessions,
Ctrl-C cancels the current question, Ctrl-D exits). Piped input is read one line at a time."""

from __future__ import annotations

import secrets
import sys
import textwrap
import time
from collections.abc import Iterable
from typing import IO

from odqa.core.errors import OdqaError
from odqa.core.fusion import score_label
from odqa.core.terminal import printable
from odqa.pipeline import NO_CONFIDENT_ANSWER, Pipeline, Result
from odqa.retriever.registry import RETRIEVERS

LEAVE_WORDS = ("exit", "quit")
HELP = """Type a question and press Enter. Commands:
  :k N                      pass N passages to the reader (now {k})
  :retriever {retrievers}   choose the retriever (now {retriever})
  :passages                 show the passages retrieved for the last question
  :entities                 show the entities linked in the last question
  :explain                  how the last answer was found: stages, scores, sources
  :help                     this text
  :quit                     leave (so do `exit`, `quit` and Ctrl-D)"""

SNIPPET_CHARS = 110
# the shell's styles stand in text as private-use characters until `say` has escaped every control character
# the shell's own style marks, put into a line before it is escaped and swapped for terminal codes at the end:
# random per process, so that no corpus, question or title can hold one and restyle or hide what is printed
_MARK = secrets.token_hex(8)
_BOLD, _DIM, _PLAIN = (f"\ue000{_MARK}{style}\ue000" for style in "bdp")
_STYLES = {_BOLD: "\033[1;33m", _DIM: "\033[2m", _PLAIN: "\033[0m"}


def question_history(path: str):
    """prompt_toolkit's file history, minus blank lines (not worth recalling with the up arrow)."""
    from prompt_toolkit.history import FileHistory

    class QuestionHistory(FileHistory):
        def append_string(self, string: str) -> None:
            if string.strip():
                super().append_string(string)

    return QuestionHistory(path)


class Shell:
    def __init__(self, pipeline: Pipeline, out: IO[str] | None = None, color: bool | None = None):
        self.pipeline = pipeline
        self.out = sys.stdout if out is None else out  # the standard output of now, not of the first import
        self.color = self.out.isatty() if color is None else color
        self.k = pipeline.config.retrieval.k
        self.retriever = pipeline.config.retrieval.retriever
        self.last: Result | None = None

    # ---- output helpers ---------------------------------------------------------------------------------
    def say(self, text: str = "") -> None:
        """Print a line: its control characters (passages, titles and questions quote the corpus) escaped,
        then the shell's own styles put in."""
        text = printable(text)
        for style, code in _STYLES.items():
            text = text.replace(style, code)
        print(text, file=self.out, flush=True)

    def _mark(self, text: str) -> str:
        return f"{_BOLD}{text}{_PLAIN}" if self.color else f"**{text}**"

    def _dim(self, text: str) -> str:
        return f"{_DIM}{text}{_PLAIN}" if self.color else text

    def snippet(self, context: str, start: int, end: int) -> str:
        """The passage around the answer, answer highlighted, on one line."""
        room = max(0, (SNIPPET_CHARS - (end - start)) // 2)
        left, right = max(0, start - room), min(len(context), end + room)
        before = ("…" if left > 0 else "") + context[left:start]
        after = context[end:right] + ("…" if right < len(context) else "")
        return " ".join(f"{before}{self._mark(context[start:end])}{after}".split())

    # ---- commands ---------------------------------------------------------------------------------------
    def handle(self, line: str) -> bool:
        """Process one input line; False means the user asked to leave."""
        line = line.strip()
        if not line:
            return True
        if line.lower() in LEAVE_WORDS:  # a bare word, as in Python's REPL; "exit" is no question
            return False
        if line.startswith(":"):
            return self.command(line)
        try:
            self.last = self.pipeline.ask(line, k=self.k, retriever=self.retriever)
        except OdqaError as exc:
            self.say(f"  ! {exc}")
            return True
        self.show(self.last)
        return True

    def command(self, line: str) -> bool:
        name, _, arg = line[1:].partition(" ")
        name, arg = name.lower(), arg.strip()
        if name in ("q", *LEAVE_WORDS):
            return False
        if name in ("h", "help", "?"):
            self.say(HELP.format(k=self.k, retriever=self.retriever, retrievers="|".join(RETRIEVERS.names)))
        elif name == "k":
            try:
                k = int(arg)  # raises on "²", which str.isdigit lets through
            except ValueError:
                k = 0
            if k <= 0:
                self.say("  ! :k needs a positive number, e.g. :k 20")
            else:
                self.k = k
                self.say(f"  k = {self.k}")
        elif name == "retriever":
            if arg not in RETRIEVERS:
                self.say(f"  ! :retriever takes {', '.join(RETRIEVERS.names)}")
            else:
                self.retriever = arg
                self.say(f"  retriever = {arg}")
        elif name in ("passages", "entities", "explain"):
            if self.last is None:
                self.say("  ! ask a question first")
            else:
                getattr(self, f"show_{name}")(self.last)
        else:
            self.say(f"  ! unknown command :{name}; type :help")
        return True

    # ---- views ------------------------------------------------------------------------------------------
    def show(self, result: Result) -> None:
        for notice in result.notices:
            self.say(f"  ({notice})")
        if result.route is not None and result.route.why:
            self.say(self._dim(f"  plan: {result.route.why}"))
        said = any(notice.startswith(NO_CONFIDENT_ANSWER) for notice in result.notices)
        if result.answers and not result.confident and not said:  # said once, by the notice where there is one
            self.say(f"  {NO_CONFIDENT_ANSWER}; best guess:")
        for i, a in enumerate(result.answers, 1):
            p = f"p={a.probability:.2f}" if a.calibrated else f"uncalibrated {a.probability:.2f}"
            self.say(f"  {i}. {self._mark(a.text) if i == 1 else a.text}   {p}  score={a.score:.2f}  — {a.title}")
            if i == 1:
                self.say(f"     {self.snippet(a.context, a.start, a.end)}")
                url = next((h.passage.url for h in result.passages if h.passage and h.passage_id == a.passage_id), "")
                if url:
                    self.say(f"     source: {url}")
                if len({e["passage_id"] for e in a.evidence}) > 1:
                    self.say("     also in: " + ", ".join(sorted({e["title"] for e in a.evidence[1:]})))
        if not result.answers and result.passages:
            best = result.passages[0].passage
            assert best is not None  # the pipeline's hits carry their passages
            self.say(f"  best passage: {best.title}: {textwrap.shorten(best.text, SNIPPET_CHARS)}")
        if result.mentions:
            self.say(
                "  entities: "
                + ", ".join(
                    f"{m.text} → {m.entity.title if m.entity else '?'} ({m.score:.2f})" for m in result.mentions
                )
            )
        t = result.timings
        self.say(self._dim("  time: " + " · ".join(f"{k} {v * 1000:.0f} ms" for k, v in t.items())))

    def show_passages(self, result: Result) -> None:
        for i, h in enumerate(result.passages, 1):
            assert h.passage is not None  # the pipeline's hits carry their passages
            self.say(f"  {i:>2}. [{score_label(h)} {h.source}] {h.passage.title} ({h.passage.id})")
            if h.passage.url:
                self.say(f"      {h.passage.url}")
            self.say(textwrap.indent(textwrap.fill(h.passage.text, 96), "      "))

    def show_entities(self, result: Result) -> None:
        if not result.mentions:
            self.say(f"  {self.pipeline.linker_off or 'no entities linked'}")
        for m in result.mentions:
            entity = m.entity.title if m.entity else "(none)"
            self.say(
                f"  [{m.start}:{m.end}] {m.text!r} → {entity}  mention={m.mention_score:.2f} "
                f"entity={m.entity_score:.2f} joint={m.score:.2f}"
            )

    def show_explain(self, result: Result) -> None:
        c = self.pipeline.config
        fusion = getattr(self.pipeline.retriever(self.retriever), "fusion", None)  # hybrids: `auto` resolved
        fusion = f"fusion {fusion.describe()}, " if fusion is not None else ""
        self.say(
            f"  retriever {self.retriever} ({fusion}candidates {c.retrieval.candidates}), "
            f"k={self.k}, entity bonus {c.retrieval.entity_bonus}"
        )
        self.say(
            f"  linked {len(result.mentions)} entities; retrieved {len(result.passages)} passages "
            f"({', '.join(sorted({h.source for h in result.passages}))})"
        )
        rank = {h.passage_id: i for i, h in enumerate(result.passages, 1)}
        for a in result.answers:
            p = f"p={a.probability:.2f}" if a.calibrated else f"uncalibrated {a.probability:.2f}"
            self.say(
                f"  {a.text!r}: score {a.score:.2f}, {p}, from passage "
                f"#{rank.get(a.passage_id, '?')} {a.title} [{a.start}:{a.end}]"
            )
        self.say("  " + " · ".join(f"{k} {v * 1000:.0f} ms" for k, v in result.timings.items()))

    # ---- loops ------------------------------------------------------------------------------------------
    def warm_up(self) -> float:
        start = time.perf_counter()
        self.pipeline.retriever(self.retriever)
        self.pipeline.reader  # noqa: B018 -- a property: loads the reader now
        self.pipeline.linker  # noqa: B018 -- a property: loads the linker now
        return time.perf_counter() - start

    def run_lines(self, lines: Iterable[str]) -> int:
        for line in lines:
            try:
                if not self.handle(line):
                    break
            except KeyboardInterrupt:
                self.say("  (cancelled)")
        return 0

    def run_interactive(self, history_file: str | None = None) -> int:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import InMemoryHistory

        session: PromptSession[str] = PromptSession(
            history=question_history(history_file) if history_file else InMemoryHistory()
        )
        self.say("odqa shell — ask a question, :help for commands, Ctrl-D to leave.")
        while True:
            try:
                line = session.prompt("odqa> ")
            except KeyboardInterrupt:
                continue  # Ctrl-C at the prompt clears the line
            except EOFError:
                return 0
            try:
                if not self.handle(line):
                    return 0
            except KeyboardInterrupt:
                self.say("  (cancelled)")
