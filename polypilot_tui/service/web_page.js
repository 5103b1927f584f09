// polypilot web: how the page gets into its dashboard (the server side is service/web.py).
//
// Loaded at the end of textual-serve's page, so it runs after textual.js has set window.onload
// (which builds the terminal and opens its websocket) and before the load event. It holds that
// start back until the page has a key for the websocket:
// - the printed address carries the token in its fragment, which no browser sends anywhere; it
//   is taken out of the address bar (and this tab's history entry) at once;
// - the token is kept in this script's memory while the page lives, and in sessionStorage (per
//   origin, port included) only from pagehide to the next load, so that a reload finds it but a
//   window the dashboard opens (which gets a copy of this tab's storage) does not;
// - for each terminal the token buys a page key (POST, Authorization header: no cookie, and no
//   other origin may send that header without the server's leave, which it never gives); the
//   key is good once, for seconds, and is what the websocket's address carries.
(() => {
  "use strict";
  const STORED = "polypilot-web-token";
  const start = window.onload;
  window.onload = null;

  const shown = new URLSearchParams(window.location.hash.slice(1)).get("token");
  if (window.location.hash) {
    history.replaceState(history.state, "", window.location.pathname + window.location.search);
  }
  let token = shown || sessionStorage.getItem(STORED);
  sessionStorage.removeItem(STORED);
  window.addEventListener("pagehide", () => {
    if (token) sessionStorage.setItem(STORED, token);
  });
  window.addEventListener("pageshow", () => sessionStorage.removeItem(STORED));

  function tell(message) {
    const where = document.querySelector(".intro-dialog .intro > div") || document.body;
    where.textContent = message;
  }

  async function pageKey() {
    const response = await fetch("/key", {
      method: "POST",
      headers: { Authorization: "Bearer " + token },
      cache: "no-store",
      credentials: "omit",
    });
    if (response.status === 403) {
      token = null; // not this server's token: keep nothing
      throw new Error("this address's token is not this server's: open the address `polypilot web` printed");
    }
    if (!response.ok) throw new Error(`polypilot web answered ${response.status}`);
    return (await response.json()).websocket;
  }

  async function begin() {
    if (!token) {
      tell("Open the address `polypilot web` printed: it holds the access token.");
      return;
    }
    if (document.readyState !== "complete") {
      await new Promise((loaded) => window.addEventListener("load", loaded, { once: true }));
    }
    for (const terminal of document.querySelectorAll(".textual-terminal")) {
      terminal.dataset.sessionWebsocketUrl = await pageKey();
    }
    if (start) start.call(window, new Event("load"));
  }

  begin().catch((error) => tell(String(error.message || error)));
})();
