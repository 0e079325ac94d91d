/* Live arena page: the league's websocket (ws/leagues/<id>/, league/consumers.py) sends the
 * arena's snapshot (league/api/arenaboard.py) on connect and a patch per new version: each rated
 * match is one. The page applies the patch (site.js's applyPatch) and redraws the
 * leaderboard, the feed and the rating chart. It never polls; after a drop it reconnects with
 * exponential backoff and starts from a new snapshot. */
(function () {
  "use strict";
  var root = document.getElementById("arena-page");
  if (!root) return;
  var leagueId = root.dataset.league;
  var state = JSON.parse(document.getElementById("snapshot").textContent);
  var site = window.leagueSite;  // site.js, loaded first on every page (templates/base.html)
  function $(id) { return document.getElementById(id); }
  function esc(text) {
    return String(text == null ? "" : text).replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c];
    });
  }
  function url(kind, id) { return root.dataset[kind].replace(kind === "matchUrl" ? "MATCH" : "PLAYER", encodeURIComponent(id)); }
  function dash(v) { return v == null ? "–" : esc(v); }

  function row(r) {
    var form = (r.form || []).map(function (f) {
      return '<span class="fm fm-' + esc(f.mark) + (f.technical ? " fm-tech" : "") + '" title="' + esc(f.match_id) + '">' + esc(f.mark) + "</span>";
    }).join("");
    return '<tr data-player="' + esc(r.player_id) + '"><td class="rank">' + r.rank + '</td><td class="left"><a href="' + url("playerUrl", r.player_id) + '">' +
      esc(r.display_name) + '</a> <span class="muted small">' + esc(r.player_id) + (r.house ? " · house bot" : "") + "</span></td>" +
      '<td class="points rating">' + dash(r.rating) + '</td><td class="sigma">' + dash(r.sigma) + '</td><td class="matches">' + r.matches + "</td>" +
      '<td class="hide-sm">' + r.wins + "-" + r.draws + "-" + r.losses + '</td><td class="hide-sm form">' + form + "</td>" +
      '<td class="left small state-' + esc(r.state) + '">' + esc(r.state) + "</td></tr>";
  }
  function renderBoard(rows) {
    $("leaderboard-body").innerHTML = rows.length ? rows.map(row).join("") : '<tr class="empty-row"><td colspan="8">No agent has joined yet.</td></tr>';
  }
  function feedItem(m) {
    var r = m.result, tech = r && r.technical_loss && r.technical_loss.length, outcome;
    if (!r) outcome = '<span class="badge badge-run">playing</span>';
    else outcome = tech ? '<span class="badge badge-tech">technical loss</span>' : r.status === "DRAW" ? '<span class="badge">draw</span>' : '<span class="badge badge-win">win</span>';
    function side(p) { return '<span class="pl' + (r && r.winner === p.player_id ? " win" : "") + '"><span class="nm">' + esc(p.display_name) + "</span></span>"; }
    return '<li class="feed-item' + (tech ? " tech" : "") + (!r ? " running" : "") + '" data-match="' + esc(m.match_id) + '"><a href="' + url("matchUrl", m.match_id) +
      '"><span class="feed-id">' + esc(m.match_id) + '</span><span class="feed-players">' + side(m.player_a) + '<span class="vs">vs</span>' + side(m.player_b) +
      '</span><span class="feed-result">' + outcome + "</span></a></li>";
  }
  function renderFeed(matches) {
    $("feed").innerHTML = matches.length ? matches.map(feedItem).join("") : '<li class="empty-row">No matches played yet.</li>';
  }
  function renderHead(s) {
    var el = $("league-status");
    el.textContent = s.league.status;
    el.className = "status status-" + s.league.status.toLowerCase();
    $("league-note").textContent = s.note;
    $("count-players").textContent = s.league.players_text;
    $("count-referees").textContent = s.league.referees_text;
    $("referee-warning").hidden = !s.referee_warning;
    $("referee-warning").textContent = s.referee_warning || "";
  }

  var palette = ["#4f46e5", "#0f9d58", "#d93025", "#f4b400", "#0891b2", "#9333ea", "#ea580c", "#64748b", "#db2777", "#65a30d", "#2563eb", "#b45309"];
  var chart = null;
  function chartData(c) {
    return { datasets: c.series.map(function (s, i) {
      var color = palette[i % palette.length];
      return { label: s.display_name, data: s.points, borderColor: color, backgroundColor: color, pointRadius: 2, borderWidth: 2 };
    }) };
  }
  function renderChart(c) {
    $("chart-empty").hidden = c.series.length > 0;
    $("chart").parentNode.hidden = c.series.length === 0;
    if (typeof Chart === "undefined") return;
    if (!chart) {
      chart = new Chart($("chart"), {
        type: "line",
        data: chartData(c),
        options: {
          animation: false, responsive: true, maintainAspectRatio: false, parsing: true,
          interaction: { mode: "nearest", intersect: false },
          scales: { x: { type: "linear", title: { display: true, text: "minutes since the arena opened" } },
                    y: { title: { display: true, text: "rating (mu - 3 sigma)" } } },
          plugins: { legend: { position: "bottom", labels: { boxWidth: 10, usePointStyle: true } } }
        }
      });
      window.arenaChart = chart;
    } else {
      chart.data = chartData(c);
      chart.update();
    }
  }

  var SECTIONS = [
    [["league", "note", "referee_warning"], function (s) { renderHead(s); }],
    [["leaderboard"], function (s) { renderBoard(s.leaderboard); }],
    [["recent_matches"], function (s) { renderFeed(s.recent_matches); }],
    [["chart"], function (s) { renderChart(s.chart); }]
  ];
  function render(s, changed) {
    state = s;
    SECTIONS.forEach(function (section) {
      if (!changed || section[0].some(function (part) { return part in changed; })) section[1](s);
    });
    site.localize(root);
    root.dataset.version = String((Number(root.dataset.version) || 0) + 1);
  }

  var version = null, socket = null, attempt = 0, live = $("live");
  function setLive(name) { live.dataset.state = name; live.querySelector(".live-label").textContent = name; }
  function resync() { if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ type: "snapshot" })); }
  function receive(msg) {
    if (msg.type === "snapshot" && msg.data) { version = msg.version; render(msg.data, null); return; }
    if (msg.type !== "patch" || msg.version === version) return;
    if (msg.from !== version || !msg.data) { resync(); return; }
    var next;
    try { next = site.applyPatch(state, msg.data); } catch (e) { resync(); return; }  // the snapshot instead
    version = msg.version;
    render(next, "$d" in msg.data ? msg.data.$d : null);
  }
  document.addEventListener("visibilitychange", function () { if (!document.hidden) resync(); });
  function connect() {
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    socket = new WebSocket(scheme + location.host + "/ws/leagues/" + encodeURIComponent(leagueId) + "/");
    socket.onopen = function () { attempt = 0; setLive("live"); };
    socket.onmessage = function (ev) { var msg; try { msg = JSON.parse(ev.data); } catch (e) { return; } receive(msg); };
    socket.onclose = function () {
      setLive("reconnecting");
      var delay = Math.min(10000, 500 * Math.pow(2, attempt)) * (0.75 + Math.random() * 0.5);
      attempt += 1;
      setTimeout(connect, delay);
    };
  }
  renderChart(state.chart);
  connect();
})();
