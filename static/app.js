/*
 * Switchyard dashboard behaviour (50-dashboard.md §9). Plain ES2020, no dependencies, no eval,
 * no inline handlers; it reads its inputs only from data-* attributes (plus the standard
 * datetime and id attributes) and from htmx event details.
 *
 * Duties, nothing more:
 *   1. Toasts: the show-toast event ({level, text}, sent by the server in HX-Trigger) renders a
 *      toast into #toasts; error toasts stay until dismissed, the others fade after 6 s.
 *   2. Countdowns: <time data-remaining-ms="84000"> ticks down from the moment it appears,
 *      on the monotonic clock (performance.now), and reads "expired — eligible on next
 *      request" at zero (or its data-expired-text).
 *   3. Local-time titles: every <time datetime="RFC 3339"> gets its title in local time
 *      (opt out with data-local-title="off").
 *   4. Copy buttons: <button data-copy-target="id"> copies that element's value or text.
 *   5. Polling: requests from [data-poll] elements are cancelled while the tab is hidden (and,
 *      with data-poll-pause="drawer", while a drawer is open), each
 *      [data-poll] element gets a "refresh" event when the tab shows again, and a failed poll
 *      marks its element .is-stale with a .stale-note until the next success. When Switchyard
 *      cannot be reached at all (a network error, not an error answer), one "connection lost"
 *      banner replaces the per-region notes until the next request gets through.
 *   6. Focus: [data-drawer] takes focus, keeps Tab inside and closes on Esc or
 *      [data-drawer-close], returning focus to what opened it; [data-autofocus] in new content
 *      takes focus (the Cancel button of a confirmation panel); [data-dismiss] removes its
 *      closest [data-dismissible] ancestor (the one-time secret panel); a swapped-in
 *      [data-dismissible] panel without [data-autofocus] takes focus on its heading. Focus a
 *      swap takes away (its row was removed, its region re-rendered) returns to the same
 *      element in the new content, else to the row that took the removed row's place, else
 *      to the region's heading — also when the mutation's event re-renders the region again
 *      right after.
 */
(function () {
  "use strict";

  const TOAST_REGION_ID = "toasts";
  const TOAST_TIMEOUT_MS = 6000;
  const TOAST_LEAVE_MS = 300;
  const MAX_TOASTS = 5;
  const COPIED_CLASS_MS = 2000;
  const EXPIRED_TEXT = "expired — eligible on next request";
  const STALE_TEXT = "Couldn't refresh — retrying";
  const SEND_ERROR_TEXT = "Couldn't reach Switchyard. Check the connection and try again.";
  const OFFLINE_ID = "connection-lost";
  const OFFLINE_TEXT = "Connection to Switchyard lost. The page keeps its last data and retries.";

  const SVG_NS = "http://www.w3.org/2000/svg";
  const FOCUSABLE = [
    "a[href]",
    "area[href]",
    "button:not([disabled])",
    "input:not([disabled]):not([type=hidden])",
    "select:not([disabled])",
    "textarea:not([disabled])",
    "iframe",
    "summary",
    "[contenteditable=true]",
    "[tabindex]:not([tabindex='-1'])",
  ].join(",");

  // Level → icon in the sprite and a prefix read by screen readers only, so a toast's level
  // never depends on its colour.
  const LEVELS = {
    success: { icon: "check", prefix: "" },
    info: { icon: "info", prefix: "" },
    warning: { icon: "alert", prefix: "Warning: " },
    error: { icon: "alert", prefix: "Error: " },
  };

  // ---------------------------------------------------------------------------------------
  // Helpers

  function isElement(x) {
    return x instanceof Element;
  }

  function isPolled(el) {
    return isElement(el) && el.hasAttribute("data-poll");
  }

  // Calls fn for root itself (when it matches) and every matching descendant.
  function eachMatch(root, selector, fn) {
    if (!root) {
      return;
    }
    if (isElement(root) && root.matches(selector)) {
      fn(root);
    }
    if (typeof root.querySelectorAll === "function") {
      root.querySelectorAll(selector).forEach(fn);
    }
  }

  function firstMatch(root, selector) {
    if (!isElement(root)) {
      return null;
    }
    return root.matches(selector) ? root : root.querySelector(selector);
  }

  function reducedMotion() {
    return typeof window.matchMedia === "function" &&
      window.matchMedia("(prefers-reduced-motion: reduce)").matches;
  }

  // The sprite URL comes from <body data-icons="/static/<hash>/icons.svg">; without it
  // toasts and notes simply have no icon.
  function icon(name) {
    const url = document.body ? document.body.getAttribute("data-icons") : "";
    if (!url) {
      return null;
    }
    const svg = document.createElementNS(SVG_NS, "svg");
    svg.setAttribute("class", "icon");
    svg.setAttribute("aria-hidden", "true");
    svg.setAttribute("focusable", "false");
    const use = document.createElementNS(SVG_NS, "use");
    use.setAttribute("href", url + "#" + name);
    svg.appendChild(use);
    return svg;
  }

  function focusElement(el) {
    if (!isElement(el)) {
      return false;
    }
    if (el.tabIndex < 0 && !el.hasAttribute("tabindex")) {
      el.setAttribute("tabindex", "-1");
    }
    el.focus();
    return document.activeElement === el;
  }

  // Where focus goes when the element holding it disappears: the main landmark.
  function focusFallback() {
    const main = document.getElementById("content") || document.querySelector("main");
    if (main) {
      focusElement(main);
    }
  }

  function visible(el) {
    return el.getClientRects().length > 0;
  }

  // ---------------------------------------------------------------------------------------
  // 1. Toasts

  function levelOf(toast) {
    const level = toast.getAttribute("data-level");
    if (level && Object.prototype.hasOwnProperty.call(LEVELS, level)) {
      return level;
    }
    for (const name of Object.keys(LEVELS)) {
      if (toast.classList.contains("toast--" + name)) {
        return name;
      }
    }
    return "info";
  }

  function showToast(level, text) {
    const region = document.getElementById(TOAST_REGION_ID);
    if (!region || !text) {
      return null;
    }
    if (!Object.prototype.hasOwnProperty.call(LEVELS, level)) {
      level = "info";
    }
    const toast = document.createElement("div");
    toast.className = "toast toast--" + level;
    toast.setAttribute("data-level", level);
    const ic = icon(LEVELS[level].icon);
    if (ic) {
      toast.appendChild(ic);
    }
    const p = document.createElement("p");
    p.className = "toast__text";
    if (LEVELS[level].prefix) {
      const prefix = document.createElement("span");
      prefix.className = "visually-hidden";
      prefix.textContent = LEVELS[level].prefix;
      p.appendChild(prefix);
    }
    p.appendChild(document.createTextNode(String(text)));
    toast.appendChild(p);
    prepareToast(toast);
    // Appended whole, so the live region announces it once.
    region.appendChild(toast);
    trimToasts(region);
    return toast;
  }

  // Adds the close button and the fade timer; used for new toasts and for toasts the server
  // rendered into #toasts with the page (flash messages after a redirect).
  function prepareToast(toast) {
    if (toast.hasAttribute("data-toast-ready")) {
      return;
    }
    toast.setAttribute("data-toast-ready", "");
    const level = levelOf(toast);
    toast.setAttribute("data-level", level);
    if (!toast.querySelector("[data-toast-close]")) {
      const close = document.createElement("button");
      close.type = "button";
      close.className = "toast__close";
      close.setAttribute("data-toast-close", "");
      close.setAttribute("aria-label", "Dismiss notification");
      const ic = icon("x");
      if (ic) {
        close.appendChild(ic);
      } else {
        const mark = document.createElement("span");
        mark.setAttribute("aria-hidden", "true");
        mark.textContent = "×";
        close.appendChild(mark);
      }
      toast.appendChild(close);
    }
    if (level === "error") {
      return; // errors stay until dismissed
    }
    let timer = 0;
    const start = function () {
      clearTimeout(timer);
      timer = setTimeout(function () {
        dismissToast(toast);
      }, TOAST_TIMEOUT_MS);
    };
    const stop = function () {
      clearTimeout(timer);
    };
    // Reading or operating a toast pauses its timer (WCAG 2.2.1).
    toast.addEventListener("mouseenter", stop);
    toast.addEventListener("mouseleave", start);
    toast.addEventListener("focusin", stop);
    toast.addEventListener("focusout", start);
    start();
  }

  function dismissToast(toast) {
    if (!toast || toast.classList.contains("toast--leaving")) {
      return;
    }
    const hadFocus = toast.contains(document.activeElement);
    toast.classList.add("toast--leaving");
    const remove = function () {
      toast.remove();
      if (hadFocus) {
        focusFallback();
      }
    };
    if (reducedMotion()) {
      remove();
    } else {
      setTimeout(remove, TOAST_LEAVE_MS);
    }
  }

  // Keeps at most MAX_TOASTS, dropping the oldest non-error toast first.
  function trimToasts(region) {
    let toasts = Array.from(region.querySelectorAll(".toast:not(.toast--leaving)"));
    while (toasts.length > MAX_TOASTS) {
      const victim = toasts.find(function (t) {
        return levelOf(t) !== "error";
      }) || toasts[0];
      victim.remove();
      toasts = toasts.filter(function (t) {
        return t !== victim;
      });
    }
  }

  document.addEventListener("show-toast", function (e) {
    const d = e.detail || {};
    const level = typeof d.level === "string" ? d.level : "info";
    let text = "";
    if (typeof d.text === "string") {
      text = d.text;
    } else if (typeof d.value === "string") {
      text = d.value; // HX-Trigger {"show-toast": "text"}
    }
    // A failed poll already shows its stale note; an error toast every few seconds would pile up.
    if (level === "error" && isPolled(e.target)) {
      return;
    }
    showToast(level, text);
  });

  // ---------------------------------------------------------------------------------------
  // 2. Countdowns

  const countdowns = new Map(); // <time> → deadline on the performance.now() clock
  let tickTimer = 0;

  // "1 m 24 s"; "45 s"; "1 h 5 m"; "2 d 3 h".
  function formatRemaining(ms) {
    let s = Math.ceil(ms / 1000);
    const d = Math.floor(s / 86400);
    s -= d * 86400;
    const h = Math.floor(s / 3600);
    s -= h * 3600;
    const m = Math.floor(s / 60);
    s -= m * 60;
    if (d > 0) {
      return d + " d " + h + " h";
    }
    if (h > 0) {
      return h + " h " + m + " m";
    }
    if (m > 0) {
      return m + " m " + s + " s";
    }
    return s + " s";
  }

  function setText(el, text) {
    if (el.textContent !== text) {
      el.textContent = text;
    }
  }

  function expireCountdown(el) {
    countdowns.delete(el);
    setText(el, el.getAttribute("data-expired-text") || EXPIRED_TEXT);
    el.classList.add("is-expired");
    // e.g. the throttled sign-in form: its button comes back when the wait is over.
    const id = el.getAttribute("data-countdown-enables");
    const target = id ? document.getElementById(id) : null;
    if (target) {
      target.disabled = false;
      target.removeAttribute("aria-disabled");
    }
    el.dispatchEvent(new CustomEvent("countdown-expired", { bubbles: true }));
  }

  function tick() {
    const now = performance.now();
    countdowns.forEach(function (deadline, el) {
      if (!el.isConnected) {
        countdowns.delete(el);
        return;
      }
      const remaining = deadline - now;
      if (remaining <= 0) {
        expireCountdown(el);
      } else {
        setText(el, formatRemaining(remaining));
      }
    });
    if (countdowns.size === 0 && tickTimer) {
      clearInterval(tickTimer);
      tickTimer = 0;
    }
  }

  function scanCountdowns(root) {
    const now = performance.now();
    eachMatch(root, "time[data-remaining-ms]", function (el) {
      if (countdowns.has(el) || el.classList.contains("is-expired")) {
        return;
      }
      const ms = Number(el.getAttribute("data-remaining-ms"));
      if (!Number.isFinite(ms)) {
        return;
      }
      if (ms <= 0) {
        expireCountdown(el);
        return;
      }
      // The server's text stays until the first tick; it uses the same format.
      countdowns.set(el, now + ms);
    });
    if (countdowns.size > 0 && !tickTimer) {
      tickTimer = setInterval(tick, 1000);
    }
  }

  // ---------------------------------------------------------------------------------------
  // 3. Local-time titles

  let localFormat = null;
  try {
    localFormat = new Intl.DateTimeFormat(undefined, {
      year: "numeric",
      month: "short",
      day: "numeric",
      hour: "2-digit",
      minute: "2-digit",
      second: "2-digit",
      timeZoneName: "short",
    });
  } catch (err) {
    localFormat = null;
  }

  // Only full timestamps (date and time); date-only values and durations keep their title.
  const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}/;

  function localizeTimes(root) {
    eachMatch(root, "time[datetime]", function (el) {
      if (el.getAttribute("data-local-title") === "off") {
        return;
      }
      const value = el.getAttribute("datetime") || "";
      if (!TIMESTAMP.test(value)) {
        return;
      }
      const t = Date.parse(value);
      if (Number.isNaN(t)) {
        return;
      }
      const date = new Date(t);
      el.title = localFormat ? localFormat.format(date) : date.toString();
    });
  }

  // ---------------------------------------------------------------------------------------
  // 4. Copy buttons

  function copySource(el) {
    if (el instanceof HTMLInputElement || el instanceof HTMLTextAreaElement) {
      return el.value;
    }
    return el.textContent || "";
  }

  function selectContents(el) {
    if (el instanceof HTMLInputElement || el instanceof HTMLTextAreaElement) {
      el.focus();
      el.select();
      return;
    }
    if (el.hasAttribute("tabindex")) {
      el.focus();
    }
    const selection = window.getSelection();
    if (selection) {
      const range = document.createRange();
      range.selectNodeContents(el);
      selection.removeAllRanges();
      selection.addRange(range);
    }
  }

  function copied(button) {
    showToast("success", "Copied");
    button.classList.add("is-copied");
    setTimeout(function () {
      button.classList.remove("is-copied");
    }, COPIED_CLASS_MS);
  }

  // Plain HTTP on a LAN address is not a secure context, so there is no clipboard API:
  // select the text and tell the admin which keys to press.
  function copyFallback(source) {
    selectContents(source);
    showToast("info", "Press Ctrl+C to copy");
  }

  function copyFrom(button) {
    const id = button.getAttribute("data-copy-target");
    const source = id ? document.getElementById(id) : null;
    if (!source) {
      return;
    }
    const text = copySource(source);
    if (window.isSecureContext && navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(text).then(
        function () {
          copied(button);
        },
        function () {
          copyFallback(source);
        },
      );
    } else {
      copyFallback(source);
    }
  }

  // ---------------------------------------------------------------------------------------
  // 5. Polling: pause while hidden, refresh on return, stale marking

  const staleNotes = new WeakMap(); // polled element → its note

  // A poll marked data-poll-pause="drawer" (the request log's live tail) also waits while a
  // detail drawer is open, so rows do not move under the request being read.
  function pollPaused(elt) {
    return document.hidden || (elt.getAttribute("data-poll-pause") === "drawer" && topDrawer() !== null);
  }

  document.addEventListener("htmx:beforeRequest", function (e) {
    const elt = e.detail && e.detail.elt;
    if (isPolled(elt) && pollPaused(elt)) {
      e.preventDefault();
    }
  });

  document.addEventListener("visibilitychange", function () {
    if (document.hidden) {
      return;
    }
    // Not bubbling, so a polled ancestor or a "from:body" listener does not fire as well.
    document.querySelectorAll("[data-poll]").forEach(function (el) {
      el.dispatchEvent(new CustomEvent("refresh", { bubbles: false }));
    });
  });

  function markStale(elt) {
    elt.classList.add("is-stale");
    const existing = staleNotes.get(elt);
    if (existing && existing.isConnected) {
      return;
    }
    const note = document.createElement("p");
    note.className = "stale-note";
    const ic = icon("refresh");
    if (ic) {
      note.appendChild(ic);
    }
    note.appendChild(document.createTextNode(STALE_TEXT));
    // Tables and lists cannot hold a <p>: put the note just before the table or list.
    if (elt.matches("table, thead, tbody, tfoot, tr, ul, ol, dl")) {
      const table = elt.closest("table");
      let host = table || elt;
      if (table && table.parentElement && table.parentElement.classList.contains("table-wrap")) {
        host = table.parentElement;
      }
      if (!host.parentNode) {
        return;
      }
      host.parentNode.insertBefore(note, host);
    } else {
      elt.insertBefore(note, elt.firstChild);
    }
    staleNotes.set(elt, note);
  }

  function clearStale(elt) {
    elt.classList.remove("is-stale");
    const note = staleNotes.get(elt);
    if (note) {
      note.remove();
      staleNotes.delete(elt);
    }
  }

  function onRequestFailed(e, message) {
    const elt = e.detail && e.detail.elt;
    if (isPolled(elt)) {
      markStale(elt);
    } else if (message) {
      showToast("error", message);
    }
  }

  // One banner for "Switchyard cannot be reached", however many regions poll: each polled
  // region only dims (.is-stale) instead of repeating the same note.
  function showOffline() {
    if (document.getElementById(OFFLINE_ID) || !document.body) {
      return;
    }
    const banner = document.createElement("div");
    banner.id = OFFLINE_ID;
    banner.className = "banner banner--danger banner--offline";
    banner.setAttribute("role", "alert");
    banner.setAttribute("data-testid", OFFLINE_ID);
    const ic = icon("alert");
    if (ic) {
      banner.appendChild(ic);
    }
    const p = document.createElement("p");
    p.textContent = OFFLINE_TEXT;
    banner.appendChild(p);
    const skip = document.querySelector(".skip-link");
    document.body.insertBefore(banner, skip ? skip.nextSibling : document.body.firstChild);
  }

  function hideOffline() {
    const banner = document.getElementById(OFFLINE_ID);
    if (!banner) {
      return;
    }
    banner.remove();
    // Regions dimmed by the outage (no note of their own) are current again with their next
    // poll; until then they show their last content undimmed, as before the outage.
    document.querySelectorAll("[data-poll].is-stale").forEach(function (el) {
      if (!staleNotes.has(el)) {
        el.classList.remove("is-stale");
      }
    });
  }

  function onUnreachable(e) {
    const elt = e.detail && e.detail.elt;
    if (isPolled(elt)) {
      elt.classList.add("is-stale");
      showOffline();
    } else {
      showToast("error", SEND_ERROR_TEXT);
    }
  }

  document.addEventListener("htmx:sendError", onUnreachable);

  document.addEventListener("htmx:timeout", onUnreachable);

  document.addEventListener("htmx:responseError", function (e) {
    const xhr = e.detail && e.detail.xhr;
    // The server announces its own errors through HX-Trigger; anything else (a proxy in
    // front of Switchyard, say) would otherwise fail silently.
    let message = "";
    if (xhr && !xhr.getResponseHeader("HX-Trigger")) {
      message = "Something went wrong (HTTP " + xhr.status + ").";
    }
    onRequestFailed(e, message);
  });

  function onSuccess(elt) {
    if (isPolled(elt)) {
      clearStale(elt);
    }
  }

  document.addEventListener("htmx:afterRequest", function (e) {
    const d = e.detail || {};
    // Any answer at all (even an error status) means Switchyard is reachable again.
    if (d.xhr && d.xhr.status > 0) {
      hideOffline();
    }
    if (d.successful) {
      onSuccess(d.elt);
    }
  });

  document.addEventListener("htmx:afterSwap", function (e) {
    const cfg = e.detail && e.detail.requestConfig;
    if (cfg && cfg.elt) {
      onSuccess(cfg.elt);
    }
  });

  // ---------------------------------------------------------------------------------------
  // 6. Drawer, autofocus, dismiss

  // drawer → {opener: element to return focus to, swapped: opened by an htmx swap}
  const drawers = new WeakMap();

  function openDrawers() {
    return Array.from(document.querySelectorAll("[data-drawer]")).filter(function (d) {
      return !d.hidden;
    });
  }

  function topDrawer() {
    const all = openDrawers();
    return all.length ? all[all.length - 1] : null;
  }

  function dialogOf(drawer) {
    return drawer.querySelector("[role=dialog]") || drawer;
  }

  function focusables(container) {
    return Array.from(container.querySelectorAll(FOCUSABLE)).filter(visible);
  }

  function openDrawer(drawer, opener, swapped) {
    if (drawers.has(drawer)) {
      return;
    }
    // Navigating inside a drawer (a link in it that loads another drawer) keeps the first opener.
    const previous = isElement(opener) ? opener.closest("[data-drawer]") : null;
    if (previous && drawers.has(previous)) {
      opener = drawers.get(previous).opener;
    }
    drawers.set(drawer, { opener: isElement(opener) ? opener : null, swapped: swapped });
    const dialog = dialogOf(drawer);
    const target =
      drawer.querySelector("[data-autofocus]") ||
      dialog.querySelector("h1, h2, h3") ||
      focusables(dialog)[0] ||
      dialog;
    focusElement(target);
  }

  function closeDrawer(drawer) {
    const state = drawers.get(drawer) || { opener: null, swapped: false };
    drawers.delete(drawer);
    drawer.remove();
    let opener = state.opener;
    // The row may have been re-rendered while the drawer was open: find it again by id.
    if (opener && !opener.isConnected) {
      opener = opener.id ? document.getElementById(opener.id) : null;
    }
    if (!opener || !focusElement(opener)) {
      focusFallback();
    }
    document.dispatchEvent(new CustomEvent("drawer-closed", { bubbles: true }));
  }

  // A drawer that came with the page (GET /logs/{id} opened directly) closes by following its
  // close link, so the address bar goes back to the list; a swapped-in drawer is removed.
  function requestClose(drawer) {
    const state = drawers.get(drawer);
    if (!state || !state.swapped) {
      const link = drawer.querySelector("a[href][data-drawer-close]");
      if (link) {
        window.location.assign(link.href);
        return;
      }
    }
    closeDrawer(drawer);
  }

  function trapTab(e, drawer) {
    const dialog = dialogOf(drawer);
    const items = focusables(dialog);
    if (items.length === 0) {
      e.preventDefault();
      focusElement(dialog);
      return;
    }
    const first = items[0];
    const last = items[items.length - 1];
    const active = document.activeElement;
    if (!dialog.contains(active)) {
      e.preventDefault();
      (e.shiftKey ? last : first).focus();
    } else if (e.shiftKey && (active === first || active === dialog)) {
      e.preventDefault();
      last.focus();
    } else if (!e.shiftKey && active === last) {
      e.preventDefault();
      first.focus();
    }
  }

  document.addEventListener("keydown", function (e) {
    if (e.defaultPrevented) {
      return;
    }
    const drawer = topDrawer();
    if (!drawer) {
      return;
    }
    if (e.key === "Escape" || e.key === "Esc") {
      e.preventDefault();
      requestClose(drawer);
    } else if (e.key === "Tab") {
      trapTab(e, drawer);
    }
  });

  function autofocus(root) {
    const el = firstMatch(root, "[data-autofocus]");
    if (el && visible(el)) {
      focusElement(el);
      return;
    }
    // A panel that opens (the connection form, a routing preview) takes focus, so keyboard
    // and screen-reader users land in what they asked for.
    const panel = firstMatch(root, "[data-dismissible]");
    if (panel && visible(panel) && !panel.contains(document.activeElement)) {
      focusElement(panel.querySelector("h1, h2, h3") || focusables(panel)[0] || panel);
    }
  }

  function focusKey(el) {
    if (el.id) {
      return "#" + el.id;
    }
    const tid = el.getAttribute("data-testid");
    return tid ? '[data-testid="' + tid.replace(/["\\]/g, "") + '"]' : "";
  }

  function rowOf(el) {
    return el.closest("tr, li, [data-row]");
  }

  function siblingRow(row, forward) {
    let r = row;
    do {
      r = forward ? r.nextElementSibling : r.previousElementSibling;
    } while (r && (r.classList.contains("row--panel") || !visible(r)));
    return r;
  }

  // Focus lost to a swap. noteFocus records where focus was (the element, its row, the rows
  // around it, the swapped region); after each settle within FOCUS_KEEP_MS, focus that fell
  // to <body> goes to the first of them the page still has. The window covers the second
  // re-render a mutation's HX-Trigger event causes right after its own swap.
  const FOCUS_KEEP_MS = 1500;
  let lostFocus = null;

  function keyOf(el) {
    return isElement(el) ? focusKey(el) : "";
  }

  // The region a swap target belongs to: its card or section (a removed row's own id is no
  // place to return to).
  function regionOf(target) {
    const start = target.matches("tr, li, [data-row]") ? target.parentElement || target : target;
    return start.closest("section[id], .card[id], [role=region][id]") || start;
  }

  // Recorded before the request too: hx-disabled-elt disables the focused button while the
  // request runs, and a disabled button drops focus to <body> before any swap.
  function noteFocus(e) {
    const active = document.activeElement;
    const target = e.detail && e.detail.target;
    if (!isElement(active) || active === document.body || !isElement(target) || !target.contains(active)) {
      return;
    }
    const row = rowOf(active);
    const inRow = row && target.contains(row);
    lostFocus = {
      keys: [keyOf(active), inRow ? keyOf(row) : "", inRow ? keyOf(siblingRow(row, true)) : "",
        inRow ? keyOf(siblingRow(row, false)) : ""],
      region: keyOf(regionOf(target)),
      until: Date.now() + FOCUS_KEEP_MS,
    };
  }
  document.addEventListener("htmx:beforeRequest", noteFocus);
  document.addEventListener("htmx:beforeSwap", noteFocus);

  function restoreFocus() {
    const lost = lostFocus;
    const active = document.activeElement;
    if (!lost || Date.now() > lost.until || (active && active !== document.body && active.isConnected)) {
      return;
    }
    for (let i = 0; i < lost.keys.length; i++) {
      const el = lost.keys[i] ? document.querySelector(lost.keys[i]) : null;
      if (!el || !visible(el)) {
        continue;
      }
      const inner = el.matches(FOCUSABLE) ? el : focusables(el)[0];
      if (focusElement(inner || el)) {
        return;
      }
    }
    const region = lost.region ? document.querySelector(lost.region) : null;
    if (!region || !focusElement(region.querySelector("h1, h2, h3") || region)) {
      focusFallback();
    }
  }

  function dismiss(trigger, e) {
    const box = trigger.closest("[data-dismissible]");
    if (!box) {
      return;
    }
    if (trigger instanceof HTMLAnchorElement) {
      e.preventDefault(); // without script the link still leads somewhere sensible
    }
    const hadFocus = box.contains(document.activeElement);
    const nextId = box.getAttribute("data-dismiss-focus");
    box.remove();
    const next = nextId ? document.getElementById(nextId) : null;
    if (next) {
      focusElement(next);
    } else if (hadFocus) {
      focusFallback();
    }
  }

  document.addEventListener("click", function (e) {
    const t = isElement(e.target) ? e.target : null;
    if (!t) {
      return;
    }
    const copy = t.closest("[data-copy-target]");
    if (copy) {
      e.preventDefault();
      copyFrom(copy);
      return;
    }
    const toastClose = t.closest("[data-toast-close]");
    if (toastClose) {
      dismissToast(toastClose.closest(".toast"));
      return;
    }
    const drawerClose = t.closest("[data-drawer-close]");
    if (drawerClose) {
      const drawer = drawerClose.closest("[data-drawer]") || topDrawer();
      if (!drawer) {
        return;
      }
      const state = drawers.get(drawer);
      if (drawerClose instanceof HTMLAnchorElement && (!state || !state.swapped)) {
        return; // page-loaded drawer: let the link navigate back to the list
      }
      e.preventDefault();
      requestClose(drawer);
      return;
    }
    const dismisser = t.closest("[data-dismiss]");
    if (dismisser) {
      dismiss(dismisser, e);
    }
  });

  // ---------------------------------------------------------------------------------------
  // New content: initial page and every htmx swap

  function scanContent(root) {
    scanCountdowns(root);
    localizeTimes(root);
  }

  // htmx:load fires once per new element (and once for <body> at start-up, which init covers).
  document.addEventListener("htmx:load", function (e) {
    const root = e.target;
    if (root === document.body) {
      return;
    }
    scanContent(root);
    autofocus(root);
  });

  // afterSettle repeats the idempotent scans (oob and settled targets) and opens drawers with
  // the element that asked for them, so focus can return there.
  document.addEventListener("htmx:afterSettle", function (e) {
    const root = e.target;
    scanContent(root);
    restoreFocus();
    const drawer = firstMatch(root, "[data-drawer]");
    if (drawer && !drawer.hidden) {
      const cfg = e.detail && e.detail.requestConfig;
      openDrawer(drawer, cfg ? cfg.elt : null, true);
    }
  });

  // A toast rendered with the page because the address asked for it (?welcome=1 after
  // setup) drops that parameter from the address, so a reload does not repeat it.
  function clearFlashParam(toast) {
    const param = toast.getAttribute("data-clear-param");
    if (!param || typeof URLSearchParams !== "function" || !window.history.replaceState) {
      return;
    }
    const url = new URL(window.location.href);
    if (url.searchParams.has(param)) {
      url.searchParams.delete(param);
      window.history.replaceState(window.history.state, "", url.pathname + url.search + url.hash);
    }
  }

  function init() {
    const region = document.getElementById(TOAST_REGION_ID);
    if (region) {
      region.querySelectorAll(".toast").forEach(function (toast) {
        prepareToast(toast);
        clearFlashParam(toast);
      });
    }
    scanContent(document.body);
    const drawer = topDrawer();
    if (drawer) {
      openDrawer(drawer, null, false);
    } else {
      autofocus(document.body);
    }
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
