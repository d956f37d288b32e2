// The page of `odqa serve`: ask /ask, show the answer in its passage. Every piece of text from the server (passages
// are untrusted corpus text) goes in through textContent or text nodes, never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const KEY_HEADER = "X-API-Key";
const KEY_STORE = "odqa-api-key";
// the key lives in this page and this tab's sessionStorage (a reload keeps it, closing the tab forgets it), never
// in localStorage or a cookie
let apiKey = null;

function storedKey() {
  if (apiKey === null) {
    try { apiKey = sessionStorage.getItem(KEY_STORE) || ""; } catch (e) { apiKey = ""; }
  }
  return apiKey;
}

function keepKey(key) {
  apiKey = key;
  try {
    if (key) sessionStorage.setItem(KEY_STORE, key);
    else sessionStorage.removeItem(KEY_STORE);
  } catch (e) { /* storage refused (private mode): the key stays in memory */ }
}

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = storedKey();
  if (key) h[KEY_HEADER] = key;
  return h;
}

function el(tag, text, cls, lang) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  if (lang) node.lang = lang;
  return node;
}

// An answer or a passage in its own language (the server's BCP 47 `lang`: ko, zh-Hans, zh-Hant, en), so that the
// browser picks the script's fonts and line breaking (page.css: Korean words stay whole, Hangul is never slanted);
// the page's own words stay English. A server from before `lang` leaves the attribute empty: inherited.
function inLanguage(node, lang) {
  node.lang = lang || "";
  return node;
}

// A passage's source article as a link, where the corpus gave an http(s) address (any other scheme, such as
// javascript:, stays text); else its title alone.
function sourceLink(title, url) {
  let safe = false;
  try { safe = Boolean(url) && ["http:", "https:"].includes(new URL(url).protocol); } catch (e) { safe = false; }
  if (!safe) return el("span", title);
  const link = el("a", title);
  link.href = url;
  link.rel = "noopener noreferrer";
  link.target = "_blank";
  return link;
}

function showError(message) {
  $("error").textContent = message;
  $("error").hidden = !message;
}

// A failed call: `status` 0 where no response came at all (fetch itself failed).
class CallError extends Error {
  constructor(message, status) {
    super(message);
    this.status = status;
  }
}

async function call(method, path, body) {
  let response;
  try {
    response = await fetch(path, { method, headers: headers(), body: body ? JSON.stringify(body) : undefined });
  } catch (e) {  // fetch says only "Failed to fetch": the server stopped, or the network between is down
    throw new CallError(`The server at ${location.origin} is not answering (stopped, or the network is down); ` +
      "start it again, then retry.", 0);
  }
  let data = null;
  try { data = await response.json(); } catch (e) { data = null; }
  if (!response.ok) {
    throw new CallError((data && data.error) || `${response.status} ${response.statusText}`, response.status);
  }
  return data;
}

// A server started with --api-key-env: the page asks for its key instead of showing an error.
function askForKey(note) {
  keepKey("");
  showError("");
  $("status").textContent = "";
  $("key-prompt").textContent = note;
  $("key-form").hidden = false;
  $("api-key").value = "";
  $("api-key").focus();
}

function keyNeeded(header) {
  askForKey(`This server needs an API key (sent in the ${header || KEY_HEADER} header); enter it to ask questions.`);
}

// a 401: the key this page sent is wrong, or it sent none
function keyRefused() {
  if (storedKey()) askForKey("The key was not accepted; enter the server's key.");
  else keyNeeded();
}

// The answer shown belongs to an earlier question: a failed call must not leave it looking like this one's.
function clearResult() {
  $("result").hidden = true;
  for (const id of ["question-echo", "verdict", "answer", "probability", "timings", "plan"]) {
    $(id).textContent = "";
  }
  for (const id of ["answer-source", "other-answers", "notices", "entities", "passages"]) $(id).replaceChildren();
}

// Whether the server links entities (/info names a linker): without one the page shows no entity section, rather
// than "none linked" under every answer.
let linking = true;

function showLinking(on) {
  linking = on;
  $("entities-section").hidden = !on;
}

async function loadInfo() {
  try {
    const info = await call("GET", "/info");
    if (info.api_key_required && !info.retrievers) {  // what /info tells a page that sent no key
      keyNeeded(info.api_key_header);
      return;
    }
    if (info.api_key_required && !$("key-form").hidden) {
      $("key-form").hidden = true;
      $("status").textContent = "Key accepted.";
    }
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
    showLinking(Boolean(info.models.linker));
    const index = info.index;
    $("index-line").textContent = `${index.passages.toLocaleString()} passages · ${index.language || ""} · ` +
      `reader: ${info.models.reader}`;
  } catch (e) {
    if (e.status === 401) keyRefused();
    else showError(e.status === 0 ? e.message : `could not read /info: ${e.message}`);
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
  $("question-echo").textContent = result.question;
  $("question-echo").lang = result.language;
  const best = result.answer;
  const box = $("answer-box");
  box.classList.toggle("unsure", !result.confident);
  box.classList.toggle("no-answer", !best);
  $("verdict").textContent = VERDICTS[outcomeOf(result)];
  // no answer: the verdict alone, never an empty answer line
  $("answer-line").hidden = !best;
  $("answer").textContent = best ? best.text : "";
  inLanguage($("answer"), best && best.lang);
  $("probability").textContent = best ? `p = ${best.probability.toFixed(2)}` : "";
  $("probability").hidden = !best;
  const bestPassage = best ? result.passages.find((p) => p.id === best.passage_id) : undefined;
  $("answer-source").replaceChildren(...(best ? [document.createTextNode("from “"),
    inLanguage(sourceLink(best.title, bestPassage && bestPassage.url), best.lang), document.createTextNode("”")] : []));
  $("other-answers").replaceChildren(...result.answers.slice(1).map((a) => {
    const item = el("li");
    item.append(el("span", a.text, null, a.lang), document.createTextNode(` (p = ${a.probability.toFixed(2)}, `),
      el("span", a.title, null, a.lang), document.createTextNode(")"));
    return item;
  }));
  $("notices").replaceChildren(...result.notices.map((n) => el("li", n)));
  // a question answered from passages in another language: how (the shell's "plan:" line)
  const route = result.route;
  $("plan").textContent = route && route.question_language !== route.passage_language && route.why
    ? `Plan: ${route.why}` : "";
  $("plan").hidden = !$("plan").textContent;

  // a question that was not searched links nothing: no heading over an empty list
  const searched = result.passages.length > 0 || result.mentions.length > 0;
  $("entities-heading").hidden = $("entities").hidden = !searched;
  $("entities").replaceChildren(...(result.mentions.length ? result.mentions.map((m) =>
    el("li", `${m.text} → ${m.title || "(no entity)"} (${m.score.toFixed(2)})`)) : [el("li", "none linked", "dim")]));
  $("entities-section").hidden = !linking && !result.mentions.length;

  const spans = spansByPassage(result.answers);
  $("passages-heading").hidden = $("passages").hidden = result.passages.length === 0;
  $("passages").replaceChildren(...result.passages.map((p) => {
    const item = inLanguage(el("li"), p.lang);
    item.dataset.passageId = p.id;
    if (best && p.id === best.passage_id) item.className = "holds-answer";
    // a fused score says which fusion made it: rrf's (about 0.03 at the top) and minmax's (0 to 1) differ in scale
    const score = `${p.score.toFixed(3)}${p.fusion ? ` (${p.fusion})` : ""}`;
    const head = el("div", null, "passage-head");
    head.append(sourceLink(p.title, p.url), document.createTextNode(` · ${p.source} ${score}`));
    item.append(head);
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
  $("status").textContent = "Asking…";
  $("ask-button").disabled = true;
  const started = performance.now();
  try {
    render(await call("POST", "/ask", body));
    $("status").textContent = `answered in ${Math.round(performance.now() - started)} ms`;
  } catch (e) {
    $("status").textContent = "";
    clearResult();
    if (e.status === 401) keyRefused();
    else showError(e.message);
  } finally {
    $("ask-button").disabled = false;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("ask-form").addEventListener("submit", ask);
  $("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    keepKey($("api-key").value);
    $("api-key").value = "";
    loadInfo();
  });
  loadInfo();
});
