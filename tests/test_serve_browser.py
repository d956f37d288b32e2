"""The page of `odqa serve` in a real browser: headless Chromium (Debian's `chromium` and `chromium-driver`) driven
by Selenium against a uvicorn server on a free port of 127.0.0.1 over the demo corpus. It types a demo question and
checks the answer, its probability and its highlight in the passage on the rendered page, then that untrusted text
(HTML, Korean, Chinese) shows as text, that the page of a server with an API key asks for it and says when the server
has gone, and that /docs and /redoc draw the API from files the server serves itself. The screenshots' paths are
listed at the end of the run (in the folder $ODQA_SCREENSHOTS where set, else the test's temporary folder).

Without Chromium or its driver the test skips and says why; where the environment variable CI is set (.ci/run
sets it, and installs both) it fails instead."""

from __future__ import annotations

import os
import shutil

import httpx
import pytest

from odqa.indexes.analysis import detect_language
from odqa.serve.app import create_app
from tests.serve_fixtures import running_server, screenshots, serve_pipeline  # noqa: F401 (fixtures)

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1100,1500",
]
QUESTION = "In what year did Alexander Fleming discover penicillin?"


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    missing = [name for name, path in (("chromium", CHROMIUM), ("chromedriver", CHROMEDRIVER)) if not path]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("selenium (pip install -e '.[test]')")
    if missing:
        why = (
            f"{' and '.join(missing)} not found: apt-get install chromium chromium-driver (Debian) for the browser test"
        )
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but {why}")
        pytest.skip(why)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in [*FLAGS, f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(120)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def server(serve_pipeline):  # noqa: F811
    with running_server(create_app(serve_pipeline)) as url:
        yield url


def _shot_folder(tmp_path):
    from pathlib import Path

    folder = Path(os.environ.get("ODQA_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _ask(browser, question: str):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    box = browser.find_element(By.ID, "question")
    box.clear()
    box.send_keys(question)
    before = browser.find_element(By.ID, "question-echo").get_attribute("textContent")
    box.send_keys(Keys.ENTER)
    WebDriverWait(browser, 300).until(
        lambda d: (
            d.find_element(By.ID, "question-echo").get_attribute("textContent") not in ("", before)
            or d.find_element(By.ID, "error").is_displayed()
        )
    )
    assert not browser.find_element(By.ID, "error").is_displayed(), browser.find_element(By.ID, "error").text


def test_page_answers_a_demo_question_with_the_answer_highlighted(browser, server, tmp_path, screenshots):  # noqa: F811
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    expected = httpx.post(f"{server}/ask", json={"question": QUESTION}, timeout=120).json()
    best = expected["answer"]
    assert "1928" in best["text"]

    browser.get(server + "/")
    # the settings come from /info: the retrievers, the default selected
    WebDriverWait(browser, 60).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#retriever option"))
    assert browser.find_element(By.ID, "retriever").get_attribute("value") == "hybrid"
    assert "308 passages" in browser.find_element(By.ID, "index-line").text
    _ask(browser, QUESTION)

    assert browser.find_element(By.ID, "answer").text == best["text"]
    assert browser.find_element(By.ID, "probability").text == f"p = {best['probability']:.2f}"
    verdict = browser.find_element(By.ID, "verdict").text
    assert verdict == ("Answer" if expected["confident"] else "No confident answer. Best guess:")
    # the highlight: the answer's own span, in the passage the answer came from, cut at the answer's offsets
    holder = browser.find_element(By.CSS_SELECTOR, f"#passages li[data-passage-id='{best['passage_id']}']")
    marks = holder.find_elements(By.CSS_SELECTOR, "mark.answer")
    assert marks and marks[0].text == best["text"]
    text = holder.find_element(By.CSS_SELECTOR, ".passage-text").get_attribute("textContent")
    passage = next(p for p in expected["passages"] if p["id"] == best["passage_id"])
    assert text == passage["text"]  # highlighting added marks, lost nothing
    assert len(browser.find_elements(By.CSS_SELECTOR, "#passages > li")) == len(expected["passages"])
    # each passage and the answer in its own language (the server's BCP 47 tag), for fonts and line breaking
    shown = [li.get_attribute("lang") for li in browser.find_elements(By.CSS_SELECTOR, "#passages > li")]
    assert (
        shown == [p["lang"] for p in expected["passages"]]
        and browser.find_element(By.ID, "answer").get_attribute("lang") == best["lang"]
    )
    assert "Alexander Fleming" in browser.find_element(By.ID, "entities").text
    timings = browser.find_element(By.ID, "timings").text
    assert all(f"{stage} " in timings for stage in ("link", "retrieve", "read", "total")) and " ms" in timings

    shot = _shot_folder(tmp_path) / "serve-page.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
    screenshots.append(str(shot))

    # (after the screenshot, which shows the page as served) a Korean best guess: upright (Hangul has no
    # italics) and broken between words only
    style = browser.execute_script(
        "const a = document.getElementById('answer'); a.lang = 'ko';"
        "document.getElementById('answer-box').classList.add('unsure');"
        "const s = getComputedStyle(a); return [s.fontStyle, s.wordBreak];"
    )
    assert style == ["normal", "keep-all"]


def test_page_shows_untrusted_text_as_text(browser, server, tmp_path, screenshots):  # noqa: F811
    from selenium.webdriver.common.by import By

    browser.get(server + "/")
    title = browser.title
    question = "<img src=x onerror=\"document.title='pwned'\"> 서울은 어느 나라의 수도인가? 长城在哪里？"
    _ask(browser, question)
    assert browser.find_element(By.ID, "question-echo").text == question
    assert not browser.find_elements(By.CSS_SELECTOR, "#result img") and browser.title == title
    # the question in its language; the page's own words (verdict, labels) stay in the page's, English
    assert browser.find_element(By.ID, "question-echo").get_attribute("lang") == detect_language([question])
    assert not browser.find_element(By.ID, "result").get_attribute("lang")
    # a question in another language than the (English) demo index's is answered across languages: the demo's
    # vectors are multilingual, so it is searched densely and its plan says so (issue 75). The question above
    # counts as English (its markup's Latin letters outnumber its Hangul and Han), so a plain Korean one is asked
    korean = "서울은 어느 나라의 수도인가?"
    assert detect_language([korean]) == "ko"
    _ask(browser, korean)
    assert browser.find_element(By.ID, "question-echo").text == korean
    assert not browser.find_element(By.ID, "verdict").text.startswith("Nothing retrieved")
    plan = browser.find_element(By.ID, "plan").text
    assert plan.startswith("Plan: Korean question over English passages: dense retrieval"), plan
    assert browser.find_elements(By.CSS_SELECTOR, "#passages > li")
    notices = browser.find_element(By.ID, "notices").text
    assert "answers may be poor" not in notices
    shot = _shot_folder(tmp_path) / "serve-page-cjk.png"
    assert browser.save_screenshot(str(shot))
    screenshots.append(str(shot))


def test_page_asks_a_guarded_server_for_its_key_then_says_when_it_is_gone(
    browser,
    serve_pipeline,  # noqa: F811
    tmp_path,
    screenshots,  # noqa: F811
):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    key = "k3y-of-the-browser-test"
    with running_server(create_app(serve_pipeline, api_key=key)) as url:
        browser.get(url + "/")
        # it opens on the key's input, not on an error
        WebDriverWait(browser, 60).until(lambda d: d.find_element(By.ID, "key-form").is_displayed())
        assert "needs an API key" in browser.find_element(By.ID, "key-prompt").text
        assert not browser.find_element(By.ID, "error").is_displayed()
        shot = _shot_folder(tmp_path) / "serve-page-key.png"
        assert browser.save_screenshot(str(shot))
        screenshots.append(str(shot))
        browser.find_element(By.ID, "api-key").send_keys(key)
        browser.find_element(By.ID, "key-button").click()
        WebDriverWait(browser, 60).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#retriever option"))
        assert not browser.find_element(By.ID, "key-form").is_displayed()
        _ask(browser, QUESTION)
        assert browser.find_element(By.ID, "answer").text  # answered, the key sent
        # the key is this tab's: sessionStorage, never localStorage
        assert browser.execute_script("return sessionStorage.getItem('odqa-api-key')") == key
        assert browser.execute_script("return localStorage.length") == 0
    # the server stopped: the next question is answered by words saying so, and the old answer goes
    browser.find_element(By.ID, "ask-button").click()
    WebDriverWait(browser, 60).until(lambda d: d.find_element(By.ID, "error").is_displayed())
    assert browser.find_element(By.ID, "error").text.startswith(f"The server at {url} is not answering")
    assert not browser.find_element(By.ID, "result").is_displayed()
    assert browser.find_element(By.ID, "answer").get_attribute("textContent") == ""


@pytest.mark.parametrize("path, holder", [("/docs", "swagger-ui"), ("/redoc", "redoc")])
def test_docs_pages_render_the_api_without_reaching_any_other_site(browser, server, path, holder):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(server + path)
    # the API's routes, drawn by Swagger UI or ReDoc from files the server itself serves (CI is offline)
    WebDriverWait(browser, 60).until(lambda d: "/ask" in d.find_element(By.ID, holder).text)
    assert not browser.find_element(By.ID, "docs-fallback").is_displayed()
    # what ran and what it read came from the server (ReDoc's attribution links an image elsewhere, which the
    # page's policy keeps from loading: tests/test_serve_conventions.py)
    loaded = browser.execute_script(
        "return performance.getEntriesByType('resource').filter(e => e.initiatorType !== 'img').map(e => e.name)"
    )
    assert loaded and all(name.startswith(server) or name.startswith("blob:") for name in loaded), loaded
