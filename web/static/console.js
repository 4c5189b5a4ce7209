// berth console: progressive enhancement only. Every page works without
// this script; with it, a live page updates itself from its event
// stream, and the command box runs without a reload. Nothing here turns
// text from a sandbox into markup: the fragments come from berth's own
// templates, which escaped it, and are parsed inertly (DOMParser runs no
// script; the content security policy allows none inline anyway).
"use strict";

// Replace the element with id `id` by the same element in the HTML text.
function swapIn(html, id) {
  const doc = new DOMParser().parseFromString(html, "text/html");
  const fresh = doc.getElementById(id);
  const old = document.getElementById(id);
  if (fresh && old) {
    old.replaceWith(document.adoptNode(fresh));
  }
}

// Live parts: <div data-live="/events/url" data-live-target="element id">.
function live(el) {
  const target = el.dataset.liveTarget;
  const source = new EventSource(el.dataset.live);
  el.dataset.liveState = "connecting";
  source.addEventListener("open", () => { el.dataset.liveState = "open"; });
  source.addEventListener("live", (e) => {
    swapIn(e.data, target);
    el.dataset.liveState = "open";
    el.dataset.liveUpdates = String(Number(el.dataset.liveUpdates || "0") + 1);
  });
  source.addEventListener("gone", () => { el.dataset.liveState = "gone"; source.close(); });
  source.addEventListener("signedout", () => { el.dataset.liveState = "signed out"; source.close(); });
  source.addEventListener("error", () => { el.dataset.liveState = "reconnecting"; });
}

// The command box: post the form with fetch and put the output in place.
function commandBox(form) {
  const out = document.getElementById("command-output");
  const button = form.querySelector("button[type=submit]");
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    button.disabled = true;
    out.setAttribute("aria-busy", "true");
    try {
      const resp = await fetch(form.action, {
        method: "POST",
        body: new URLSearchParams(new FormData(form)),
        headers: { "Berth-Fragment": "command" },
        credentials: "same-origin",
      });
      const doc = new DOMParser().parseFromString(await resp.text(), "text/html");
      if (resp.ok) {
        out.replaceChildren(...Array.from(doc.body.childNodes).map((n) => document.adoptNode(n)));
      } else {
        // An error page (signed out, a refused form, a server gone):
        // its message, as text.
        const alert = doc.querySelector("[role=alert]");
        const p = document.createElement("p");
        p.className = "box error";
        p.setAttribute("role", "alert");
        p.textContent = (alert ? alert.textContent.trim() : "The command was refused (" + resp.status + ").") + " Reload the page to go on.";
        out.replaceChildren(p);
      }
    } catch (err) {
      out.textContent = "The command could not be sent: " + err;
    } finally {
      button.disabled = false;
      out.removeAttribute("aria-busy");
    }
  });
}

document.querySelectorAll("[data-live]").forEach(live);
const form = document.getElementById("command-form");
if (form) {
  commandBox(form);
}
