// The inspector's few interactions: a chunk's raw text on click, the archive search and the
// detail trace. Text from the server is always set as text, never parsed as markup.
"use strict";

(function () {
  const root = document.getElementById("inspector");
  if (!root) return;
  const base = "/ui/sessions/" + encodeURIComponent(root.dataset.session);
  const headers = { "Content-Type": "application/json", "X-Ebbtide-UI": "1" };

  async function call(path, body) {
    const response = await fetch(base + path, {
      method: body === undefined ? "GET" : "POST",
      headers: headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "same-origin",
    });
    if (!response.ok) {
      let message = response.status + " " + response.statusText;
      try {
        message = (await response.json()).error.message;
      } catch (ignored) { /* not an error body */ }
      throw new Error(message);
    }
    return response;
  }

  for (const details of document.querySelectorAll("details.chunk-text")) {
    details.addEventListener("toggle", async function () {
      const pre = details.querySelector("pre");
      if (!details.open || details.dataset.loaded) return;
      pre.textContent = "loading…";
      try {
        const response = await call("/chunks/" + encodeURIComponent(details.dataset.chunk));
        pre.textContent = await response.text();
        details.dataset.loaded = "1";
      } catch (error) {
        pre.textContent = "could not load: " + error.message;
      }
    });
  }

  const search = document.getElementById("search-form");
  if (search) {
    search.addEventListener("submit", async function (event) {
      event.preventDefault();
      const out = document.getElementById("search-result");
      out.textContent = "searching…";
      try {
        const answer = await (await call("/recall", { query: search.elements.query.value })).json();
        out.textContent = answer.text;
        out.dataset.chunks = answer.chunk_ids.join(" ");
      } catch (error) {
        out.textContent = "search failed: " + error.message;
      }
    });
  }

  const VERDICTS = {
    not_stored: "not stored: no message or chunk holds these words",
    not_found: "not found: stored, but the search did not bring it up",
    found_not_in_top_k: "found, not in the top k",
    in_prompt: "in the prompt",
  };

  const trace = document.getElementById("trace-form");
  if (trace) {
    trace.addEventListener("submit", async function (event) {
      event.preventDefault();
      const out = document.getElementById("trace-result");
      out.replaceChildren();
      const body = { text: trace.elements.text.value, turn: Number(trace.dataset.turn) };
      try {
        const answer = await (await call("/trace", body)).json();
        const verdict = document.createElement("p");
        verdict.className = "verdict verdict-" + answer.verdict;
        verdict.dataset.verdict = answer.verdict;
        verdict.textContent = "Turn " + answer.turn + ": " + VERDICTS[answer.verdict];
        out.append(verdict);
        const list = document.createElement("ul");
        for (const place of answer.places) {
          const item = document.createElement("li");
          const what = place.where === "window" ? "window message " : "chunk ";
          item.textContent = what + place.ref + ": " + place.reason.replaceAll("_", " ");
          list.append(item);
        }
        out.append(list);
        if (!answer.searched_all) {
          const note = document.createElement("p");
          note.className = "muted";
          note.textContent = "Only the newest " + answer.chunks_searched + " chunks were searched.";
          out.append(note);
        }
      } catch (error) {
        out.textContent = "trace failed: " + error.message;
      }
    });
  }
})();
