/* Every page: times in the viewer's own time zone (UTC stays in the title), countdowns, copy
 * buttons, and live pages. A page whose <main> has data-live-ws follows that websocket
 * (ws/leagues/ for the league list, ws/leagues/<id>/ for a league's match, player and referee
 * pages, with ?brief=1: one short "changed" message per push, league/consumers.py): a change
 * re-reads the page and swaps its content in place, so every count and state on it stays current
 * without a reload. Re-reads are throttled, not debounced: at most one per THROTTLE_MS, and
 * never later than that however often changes come. The league page itself applies the pushed
 * patches (league.js). */
(function () {
  "use strict";
  var pad = function (n) { return (n < 10 ? "0" : "") + n; };

  function localize(root) {
    (root || document).querySelectorAll("time.local[datetime]").forEach(function (el) {
      var d = new Date(el.getAttribute("datetime"));
      if (isNaN(d.getTime())) return;
      var time = pad(d.getHours()) + ":" + pad(d.getMinutes());
      el.textContent = el.dataset.format === "time" ? time :
        d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " + time;
    });
  }

  // Countdowns: <span class="countdown" data-until="ISO">; at zero the page is asked to refresh,
  // since a closing window changes what it shows without any event.
  var expired = {};
  function tick() {
    document.querySelectorAll(".countdown[data-until]").forEach(function (el) {
      var until = el.dataset.until, end = until ? new Date(until).getTime() : NaN;
      if (isNaN(end)) { el.textContent = ""; return; }
      var left = Math.round((end - Date.now()) / 1000);
      if (left <= 0) {
        el.textContent = "(closed)";
        if (!expired[until]) { expired[until] = true; document.dispatchEvent(new CustomEvent("league:stale")); }
        return;
      }
      var h = Math.floor(left / 3600), m = Math.floor((left % 3600) / 60), s = left % 60;
      el.textContent = "(in " + (h ? h + ":" + pad(m) : m) + ":" + pad(s) + ")";
    });
  }

  document.addEventListener("click", function (ev) {
    var button = ev.target.closest && ev.target.closest("button.copy[data-copy]");
    if (!button) return;
    var text = document.getElementById(button.dataset.copy).textContent;
    var done = function () { button.textContent = "Copied"; setTimeout(function () { button.textContent = "Copy"; }, 1500); };
    if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(text).then(done, function () {});
    else {
      var area = document.createElement("textarea");
      area.value = text; document.body.appendChild(area); area.select();
      try { document.execCommand("copy"); done(); } catch (e) { /* nothing to do */ }
      area.remove();
    }
  });

  // A pushed patch applied to a live page's state: the other half of league/api/live.py's diff,
  // for the league page (league.js) and the arena page (arena.js).
  function applyPatch(value, patch) {
    if (patch == null) return value;
    if ("$r" in patch) return patch.$r;
    var out;
    if ("$d" in patch) {
      out = {};
      Object.keys(value).forEach(function (k) { out[k] = value[k]; });
      Object.keys(patch.$d).forEach(function (k) {
        var p = patch.$d[k];
        // A patch that is not an op (a dict) is the entry's new value itself.
        out[k] = p !== null && typeof p === "object" && !Array.isArray(p) ? applyPatch(value[k], p) : p;
      });
      return out;
    }
    if ("$a" in patch) return value.slice(patch.x).concat(patch.$a);
    if ("$t" in patch) return value.slice(0, patch.n).concat(patch.$t);
    // An op this script does not know (a server newer than the page): the caller resyncs.
    if (!("$l" in patch)) throw new Error("unknown patch op: " + Object.keys(patch).join(","));
    var key = patch.$l, rows = {};
    value.forEach(function (row) { rows[String(row[key])] = row; });
    var order = patch.o || value.map(function (row) { return row[key]; });
    return order.map(function (id) { return applyPatch(rows[String(id)], patch.i[String(id)]); });
  }

  window.leagueSite = { localize: localize, tick: tick, applyPatch: applyPatch };
  localize(document);
  tick();
  setInterval(tick, 1000);

  // -- pages that follow a websocket by re-reading themselves ------------------------------
  var main = document.getElementById("main");
  var path = main && main.dataset.liveWs;
  if (!path) return;
  var THROTTLE_MS = 250;
  var timer = null, inFlight = false, again = false, attempt = 0, last = 0;
  function reload() {
    timer = null;
    if (inFlight) { again = true; return; }
    inFlight = true;
    last = Date.now();
    fetch(location.href, { headers: { Accept: "text/html" }, cache: "no-store" })
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.text(); })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("main");
        if (!fresh) return;
        main.innerHTML = fresh.innerHTML;
        localize(main);
        tick();
        main.dataset.version = String((Number(main.dataset.version) || 0) + 1);
      })
      .catch(function () { /* the next change or reconnect tries again */ })
      .then(function () { inFlight = false; if (again) { again = false; schedule(); } });
  }
  // A change arriving while a re-read is planned joins it: the timer is never pushed back.
  function schedule() {
    if (timer) return;
    timer = setTimeout(reload, Math.max(0, last + THROTTLE_MS - Date.now()));
  }
  document.addEventListener("league:stale", schedule);
  var brief = path === "/ws/leagues/" ? "" : (path.indexOf("?") < 0 ? "?" : "&") + "brief=1";
  // A page about one player, referee or match is told at once of what names it, of the rest of
  // the league now and then (league/consumers.py, BRIEF_EVERY).
  if (brief && main.dataset.liveAbout) brief += "&about=" + encodeURIComponent(main.dataset.liveAbout);
  function connect() {
    var socket = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + path + brief);
    window.pageSocket = socket;
    socket.onopen = function () {
      if (attempt > 0) schedule();  // catch up on what happened while disconnected
      attempt = 0;
      main.dataset.live = "live";
    };
    socket.onmessage = function (ev) {
      var msg;
      try { msg = JSON.parse(ev.data); } catch (e) { return; }
      if (msg.type === "event") { main.dataset.lastEvent = msg.event || ""; schedule(); }
      if (msg.type === "changed") {
        if (msg.events && msg.events.length) main.dataset.lastEvent = msg.events[msg.events.length - 1].event || "";
        if (msg.moved || (msg.events && msg.events.length)) schedule();
      }
    };
    socket.onclose = function (ev) {
      main.dataset.live = "reconnecting";
      if (ev.code === 4404) return;  // the league is gone
      var delay = Math.min(10000, 500 * Math.pow(2, attempt)) * (0.75 + Math.random() * 0.5);
      attempt += 1;
      setTimeout(connect, delay);
    };
  }
  connect();
  // A league's socket is told of changes made in any process (its server looks every few seconds,
  // league/consumers.py); the league list's hears events only, and events from another process
  // without a shared channel layer cannot reach this one: so the list re-reads now and then while
  // the tab is visible and a league is under way (data-live-active).
  setInterval(function () { if (!document.hidden && main.dataset.liveActive && !brief) schedule(); }, 15000);
})();
