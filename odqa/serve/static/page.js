// The page of `odqa serve`: ask /ask, show the answer in its passage. Every piece of text from the server (passages
// are untrusted corpus text) goes in through textContent or text nodes, never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const KEY_HEADER = "X-API-Key";

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = sessionStorage.getItem("odqa-api-key");
  if (key) h[KEY_HEADER] = key;
  return h;
}

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}

function showError(message) {
  $("error").textContent = message;
  $("error").hidden = !message;
}

async function call(method, path, body) {
  const response = await fetch(path, { method, headers: headers(), body: body ? JSON.stringify(body) : undefined });
  let data = null;
  try { data = await response.json(); } catch (e) { data = null; }
  if (response.status === 401) $("key-label").hidden = false;
  if (!response.ok) throw new Error((data && data.error) || `${response.status} ${response.statusText}`);
  return data;
}

async function loadInfo() {
  try {
    const info = await call("GET", "/info");
    const select = $("retriever");
    select.replaceChildren();
    for (const name of info.retrievers) {
      const option = el("option", name);
      option.value = name;
      option.selected = name === info.defaults.retriever;
      select.append(option);
    }
    $("k").placeholder = info.defaults.k;
    $("k").max = info.limits.max_k;
    $("question").maxLength = info.limits.max_question_chars;
    const index = info.index;
    $("index-line").textContent = `${index.passages.toLocaleString()} passages · ${index.language || ""} · ` +
      `reader: ${info.models.reader}`;
  } catch (e) {
    showError(`could not read /info: ${e.message}`);
  }
}

// Highlight [start, end) spans of `text`; offsets count Unicode code points (Python's str), so the text is cut
// by code points, not UTF-16 units. Overlapping spans: the first listed wins.
function highlighted(text, spans) {
  const chars = Array.from(text);
  const chosen = [];
  for (const span of spans) {
    if (span.start < 0 || span.end > chars.length || span.start >= span.end) continue;
    if (chosen.some((c) => span.start < c.end && c.start < span.end)) continue;
    chosen.push(span);
  }
  chosen.sort((a, b) => a.start - b.start);
  const out = el("p", null, "passage-text");
  let at = 0;
  for (const span of chosen) {
    out.append(document.createTextNode(chars.slice(at, span.start).join("")));
    const mark = el("mark", chars.slice(span.start, span.end).join(""), span.cls);
    out.append(mark);
    at = span.end;
  }
  out.append(document.createTextNode(chars.slice(at).join("")));
  return out;
}

function spansByPassage(answers) {
  // the best answer's own span, its evidence in other passages, then the other answers' spans
  const spans = new Map();
  const add = (id, start, end, cls) => {
    if (!spans.has(id)) spans.set(id, []);
    spans.get(id).push({ start, end, cls });
  };
  answers.forEach((answer, i) => {
    const cls = i === 0 ? "answer" : "other";
    add(answer.passage_id, answer.start, answer.end, cls);
    if (i === 0) {
      for (const e of answer.evidence) if (e.passage_id !== answer.passage_id) add(e.passage_id, e.start, e.end, cls);
    }
  });
  return spans;
}

// What the verdict says, by the server's `outcome`: what happened, and never an answer, or a reading of passages,
// that did not happen (a question in another language than the index's is not searched: nothing is retrieved).
const VERDICTS = {
  answer: "Answer",
  best_guess: "No confident answer. Best guess:",
  no_answer: "No answer found in the retrieved passages.",
  no_passages: "No passages were retrieved for this question, so nothing was read.",
  language_differs: "Nothing retrieved: the question is in another language than the index (see below).",
};

function outcomeOf(result) {
  if (Object.prototype.hasOwnProperty.call(VERDICTS, result.outcome)) return result.outcome;
  if (result.answer) return result.confident ? "answer" : "best_guess";  // a server from before `outcome`
  return result.passages.length ? "no_answer" : "no_passages";
}

function render(result) {
  $("result").hidden = false;
  $("result").lang = result.language;
  $("question-echo").textContent = result.question;
  const best = result.answer;
  const box = $("answer-box");
  box.classList.toggle("unsure", !result.confident);
  $("verdict").textContent = VERDICTS[outcomeOf(result)];
  $("answer").textContent = best ? best.text : "";
  $("probability").textContent = best ? `p = ${best.probability.toFixed(2)}` : "";
  $("probability").hidden = !best;
  $("answer-source").textContent = best ? `from “${best.title}”` : "";
  $("other-answers").replaceChildren(...result.answers.slice(1).map((a) =>
    el("li", `${a.text} (p = ${a.probability.toFixed(2)}, ${a.title})`)));
  $("notices").replaceChildren(...result.notices.map((n) => el("li", n)));

  $("entities").replaceChildren(...(result.mentions.length ? result.mentions.map((m) =>
    el("li", `${m.text} → ${m.title || "(no entity)"} (${m.score.toFixed(2)})`)) : [el("li", "none linked", "dim")]));

  const spans = spansByPassage(result.answers);
  $("passages").replaceChildren(...result.passages.map((p) => {
    const item = el("li");
    item.dataset.passageId = p.id;
    if (best && p.id === best.passage_id) item.className = "holds-answer";
    item.append(el("div", `${p.title} · ${p.source} ${p.score.toFixed(3)}`, "passage-head"));
    item.append(highlighted(p.text, spans.get(p.id) || []));
    return item;
  }));
  const t = result.timings_ms;
  $("timings").textContent = "time: " + Object.keys(t).map((stage) => `${stage} ${Math.round(t[stage])} ms`).join(" · ") +
    (result.batch_size > 1 ? ` (read with ${result.batch_size - 1} other questions)` : "");
}

async function ask(event) {
  event.preventDefault();
  showError("");
  const question = $("question").value;
  const body = { question };
  if ($("retriever").value) body.retriever = $("retriever").value;
  if ($("k").value) body.k = Number($("k").value);
  if ($("api-key").value) sessionStorage.setItem("odqa-api-key", $("api-key").value);
  $("status").textContent = "Asking…";
  $("ask-button").disabled = true;
  const started = performance.now();
  try {
    render(await call("POST", "/ask", body));
    $("status").textContent = `answered in ${Math.round(performance.now() - started)} ms`;
  } catch (e) {
    $("status").textContent = "";
    showError(e.message);
  } finally {
    $("ask-button").disabled = false;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("ask-form").addEventListener("submit", ask);
  $("api-key").addEventListener("change", () => { sessionStorage.setItem("odqa-api-key", $("api-key").value); loadInfo(); });
  loadInfo();
});
