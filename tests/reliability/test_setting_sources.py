"""Issue 65, class A: one rule for a numeric setting, whatever gives it. A NaN, an infinity or an out-of-range
value is refused in one line naming the setting, the value, where it came from and the allowed range: from a
command-line flag (exit 2), a TOML or YAML config file (exit 2) and the HTTP request body of `odqa serve` (422).
(No environment variable sets a number; the ones odqa reads hold credentials and paths.) And no JSON odqa writes
(`ask --json`, `predict` lines, HTTP responses) holds NaN or Infinity: a non-finite number fails in one line.

Before the fix a config file's `retrieval_weight = inf` answered a whole clause and printed `"score": Infinity`,
`no_answer_threshold = nan` made every answer unconfident and `entity_bonus = nan` was silently 0; a flag out of
its range was refused as "config: ..." (not the flag), and an HTTP response turned a NaN score into null.
No model is loaded: every refusal comes before the pipeline's first use, and the JSON cases use a stub pipeline.
"""

from __future__ import annotations

import json
import math

import pytest

from odqa.config import OdqaConfig, config_fields
from odqa.core.errors import OdqaError
from tests.reliability.cli_checks import run_cli
from tests.reliability.stub_pipeline import StubPipeline, serve_client  # noqa: F401 (a fixture)

QUESTION = "who wrote hamlet"


def strict_json(text: str):
    """json.loads that refuses NaN, Infinity and -Infinity, as every JSON reader but Python's does."""

    def refuse(word):
        raise ValueError(f"not JSON: {word}")

    return json.loads(text, parse_constant=refuse)


# ---- the same value from each source -------------------------------------------------------------------------
# (setting, value as written, the range the refusal names, the command and flag that set it: None where there is
# no flag, or where the flag was bounded already, as --entity-bonus, --early-stop-probability and --k were:
# tests/reliability/test_numeric_arguments.py holds every flag to its Number type)
CASES = [
    ("reader.retrieval_weight", "inf", ">= 0", None),
    ("reader.retrieval_weight", "-inf", ">= 0", None),
    ("reader.retrieval_weight", "nan", ">= 0", None),
    ("reader.retrieval_weight", "-1", ">= 0", None),
    ("reader.no_answer_threshold", "nan", "a finite number", None),
    ("reader.no_answer_threshold", "-inf", "a finite number", None),
    ("retrieval.entity_bonus", "nan", ">= 0", None),
    ("retrieval.entity_bonus", "inf", ">= 0", None),
    ("retrieval.entity_bonus", "-0.5", ">= 0", None),
    ("retrieval.alpha", "2", "<= 1", ("search", "--alpha")),
    ("retrieval.alpha", "-inf", "<= 1", ("search", "--alpha")),
    ("reader.early_stop_probability", "1.5", "<= 1", None),
    ("reader.early_stop_probability", "nan", "<= 1", None),
    ("linker.mention_threshold", "5", "<= 1", ("link", "--mention-threshold")),
    ("linker.entity_threshold", "inf", "<= 1", ("link", "--entity-threshold")),
    ("retrieval.k", "0", "positive whole number", None),
    ("retrieval.k", "inf", "positive whole number", None),
    ("reader.top_n", "nan", "positive whole number", None),
]
YAML_WORDS = {"inf": ".inf", "-inf": "-.inf", "nan": ".nan"}  # YAML's spelling of the non-finite floats
PARAMS = [(source, *case) for case in CASES for source in ("flag", "toml", "yaml") if source != "flag" or case[3]]


def _value_forms(text: str) -> set[str]:
    """How a refusal may quote the value: as written, or as Python prints the number."""
    forms = {text}
    try:
        forms.add(repr(float(text)))
    except ValueError:
        pass
    return forms


def _write_config(tmp_path, source: str, setting: str, text: str):
    section, name = setting.split(".")
    if source == "toml":
        path = tmp_path / "settings.toml"
        path.write_text(f"[{section}]\n{name} = {text}\n")
    else:
        path = tmp_path / "settings.yaml"
        path.write_text(f"{section}:\n  {name}: {YAML_WORDS.get(text, text)}\n")
    return path


def _one_error_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if "error:" in line]
    assert len(errors) == 1 and "Traceback" not in text, text[-1500:]
    return errors[0]


@pytest.mark.parametrize("source, setting, text, bound, flag", PARAMS, ids=[f"{p[0]}-{p[1]}={p[2]}" for p in PARAMS])
def test_a_bad_number_is_refused_alike_from_every_source(
    tmp_path, monkeypatch, capsys, source, setting, text, bound, flag
):
    monkeypatch.setenv("ODQA_HOME", str(tmp_path / "home"))
    if source == "flag":
        command, option = flag
        argv = [command, f"{option}={text}", QUESTION]  # =: "-inf" is no option
        named, came_from = option, f"argument {option}"
    else:
        path = _write_config(tmp_path, source, setting, text)
        argv = ["ask", "--config", path, QUESTION]
        named, came_from = setting, path.name
    code, output = run_cli(argv, capsys)
    assert code == 2, output[-1500:]
    line = _one_error_line(output)
    assert named in line and came_from in line, line  # the setting and where it came from
    assert any(form in line for form in _value_forms(text)), line  # the value
    assert bound in line, line  # the allowed range


NUMERIC = [
    (f"{section}.{f.name}", f.type)
    for section in ("retrieval", "reader", "linker", "elastic")
    for f in config_fields(type(getattr(OdqaConfig(), section)))
    if f.type in ("int", "float", "float | None", "int | None")
]


@pytest.mark.parametrize("setting", [s for s, _ in NUMERIC])
@pytest.mark.parametrize("text", ["nan", "inf", "-inf"])
def test_every_numeric_setting_of_a_config_file_refuses_non_finite_values(tmp_path, setting, text):
    """The class, not the three examples: no numeric setting of any section takes NaN or an infinity, and the
    refusal says so (not "must be int"), with the range."""
    path = _write_config(tmp_path, "toml", setting, text)
    with pytest.raises(OdqaError) as refused:
        OdqaConfig.load(path)
    message = str(refused.value)
    assert setting in message and path.name in message and "\n" not in message, message
    assert f"= {text} " in message and "is not a finite number; give a" in message, message


@pytest.mark.parametrize("text", ["inf", "nan", "-Infinity"])
def test_a_word_that_reads_as_a_number_is_held_to_the_same_rule(tmp_path, text):
    """YAML reads `inf` as a string, which the config converts to the number: the rule applies to that number."""
    path = tmp_path / "settings.yaml"
    path.write_text(f"reader:\n  retrieval_weight: {text}\n")
    with pytest.raises(
        OdqaError,
        match=r"reader.retrieval_weight = -?(inf|nan) \(from .*settings.yaml\) is not a "
        r"finite number; give a finite number >= 0",
    ):
        OdqaConfig.load(path)


@pytest.mark.parametrize(
    "setting, value",
    [
        ("reader.retrieval_weight", math.inf),
        ("retrieval.entity_bonus", math.nan),
        ("reader.no_answer_threshold", -math.inf),
    ],
)
def test_a_library_caller_gets_the_same_refusal(setting, value):
    with pytest.raises(OdqaError, match=rf"{setting} = {value!r} \(from the command line\) is not a finite number"):
        OdqaConfig.load(None, {setting: value})
    section, name = setting.split(".")
    config = OdqaConfig()
    setattr(getattr(config, section), name, value)  # set by hand: validate() holds it to the same rule
    with pytest.raises(OdqaError, match=rf"{setting} = {value!r} \(the config\) is not a finite number"):
        config.validate()


# ---- the HTTP request body ---------------------------------------------------------------------------------


BODIES = {  # the body as sent, the value as the refusal quotes it, the range
    "Infinity": (b'{"question": "who wrote hamlet", "k": Infinity}', "Infinity", "positive whole number"),
    "-Infinity": (b'{"question": "who wrote hamlet", "k": -Infinity}', "-Infinity", "positive whole number"),
    "NaN": (b'{"question": "who wrote hamlet", "k": NaN}', "NaN", "positive whole number"),
    "1e400": (b'{"question": "who wrote hamlet", "k": 1e400}', "Infinity", "positive whole number"),
    "0": (b'{"question": "who wrote hamlet", "k": 0}', "0", "positive whole number"),
    "-3": (b'{"question": "who wrote hamlet", "k": -3}', "-3", "positive whole number"),
    "2.5": (b'{"question": "who wrote hamlet", "k": 2.5}', "2.5", "positive whole number"),
    "over max_k": (b'{"question": "who wrote hamlet", "k": 101}', "101", "<= 100"),
}


@pytest.mark.parametrize("path", ["/ask", "/search"])
@pytest.mark.parametrize("case", list(BODIES))
def test_a_bad_number_in_the_request_body_is_a_422_naming_it(serve_client, path, case):  # noqa: F811
    body, shown, bound = BODIES[case]
    with serve_client() as client:
        response = client.post(path, content=body, headers={"content-type": "application/json"})
    assert response.status_code == 422, response.text
    error = strict_json(response.text)
    line = error["error"]
    assert error["field"] == "k" and line.startswith("k: ") and "\n" not in line, line
    assert shown in line and "request body" in line and bound in line, line


# ---- JSON output is strict ---------------------------------------------------------------------------------
@pytest.fixture()
def stub_cli_pipeline(monkeypatch):
    """`ask` and `predict` over a pipeline whose answer scores infinity (what retrieval_weight = inf gave), with
    a NaN probability."""
    from odqa.pipeline import Pipeline

    stub = StubPipeline(score=math.inf, probability=math.nan)
    monkeypatch.setattr(Pipeline, "check_available", lambda self: None)
    monkeypatch.setattr(
        Pipeline, "ask_batch", lambda self, questions, k=None, retriever=None: stub.ask_batch(questions)
    )
    monkeypatch.setattr(Pipeline, "inference_plans", lambda self: {})
    return stub


@pytest.mark.parametrize("command", ["ask --json", "predict"])
@pytest.mark.usefixtures("stub_cli_pipeline")
def test_cli_json_never_holds_nan_or_infinity(tmp_path, monkeypatch, capsys, command):
    monkeypatch.setenv("ODQA_HOME", str(tmp_path / "home"))
    questions = tmp_path / "q.txt"
    questions.write_text(f"{QUESTION}\n")
    argv = ["ask", "--json", QUESTION] if command == "ask --json" else ["predict", questions]
    try:
        from odqa.cli import main

        code = main([str(a) for a in argv])
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    for line in out.splitlines():  # whatever was printed is JSON a strict reader takes
        strict_json(line)
    assert code == 2, out + err
    line = _one_error_line(err)
    place = "answers[0].score = inf" if command == "ask --json" else "probability = nan"
    assert place in line and "as JSON" in line, line


def test_an_http_response_never_holds_nan_or_infinity(serve_client):  # noqa: F811
    with serve_client(StubPipeline(score=math.nan)) as client:
        response = client.post("/ask", json={"question": QUESTION})
    body = strict_json(response.text)  # never the invalid JSON NaN
    assert response.status_code == 500, response.text  # and never a NaN turned into null
    assert "not a finite number" in body["error"] and "score" in body["error"], body
