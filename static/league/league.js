/* Live league page: a websocket per league (ws/leagues/<id>/) sends a snapshot on connect and
 * then one message per league event. Each event triggers a (debounced) fetch of the REST
 * snapshot, which re-renders standings, feed, progress, schedule and chart in place. After a
 * drop the socket reconnects with exponential backoff and the page catches up from the API. */
(function () {
  "use strict";
  var root = document.getElementById("league-page");
  if (!root) return;
  var leagueId = root.dataset.league;
  var apiUrl = root.dataset.api;
  var matchUrl = function (id) { return root.dataset.matchUrl.replace("MATCH", encodeURIComponent(id)); };
  var playerUrl = function (id) { return root.dataset.playerUrl.replace("PLAYER", encodeURIComponent(id)); };
  var state = JSON.parse(document.getElementById("snapshot").textContent);
  var seenMatches = {};
  (state.recent_matches || []).forEach(function (m) { seenMatches[m.match_id + ":" + m.status] = true; });

  function esc(text) {
    return String(text == null ? "" : text).replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c];
    });
  }
  function $(id) { return document.getElementById(id); }

  // -- rendering (same markup as the server templates) ------------------------------------
  function renderStandings(rows, previous) {
    var before = {};
    (previous || []).forEach(function (r) { before[r.player_id] = r.points + ":" + r.rank; });
    if (!rows.length) { $("standings-body").innerHTML = '<tr class="empty-row"><td colspan="8">No players registered yet.</td></tr>'; return; }
    $("standings-body").innerHTML = rows.map(function (r) {
      var changed = previous && before[r.player_id] !== r.points + ":" + r.rank;
      return '<tr data-player="' + esc(r.player_id) + '"' + (changed ? ' class="changed"' : "") + '>' +
        '<td class="rank">' + r.rank + '</td>' +
        '<td class="left"><a href="' + playerUrl(r.player_id) + '">' + esc(r.display_name) + '</a> <span class="muted small">' + esc(r.player_id) + '</span></td>' +
        '<td>' + r.played + '</td><td>' + r.wins + '</td><td>' + r.draws + '</td><td>' + r.losses + '</td>' +
        '<td class="hide-sm">' + r.technical_losses + '</td><td class="points">' + r.points + '</td></tr>';
    }).join("");
  }

  function side(m, p) {
    var r = m.result, win = r && r.winner === p.player_id, choice = r && r.choices ? r.choices[p.player_id] : null;
    return '<span class="pl' + (win ? " win" : "") + '">' + esc(p.display_name) + (choice ? ' <i class="choice">' + esc(choice) + '</i>' : "") + '</span>';
  }

  function feedItem(m, fresh) {
    var r = m.result, tech = r && r.technical_loss && r.technical_loss.length, outcome;
    if (!r) outcome = '<span class="badge badge-run">playing</span>';
    else {
      outcome = (r.drawn_number != null ? '<span class="drawn" title="drawn number">' + esc(r.drawn_number) + '</span>' : "") +
        (tech ? '<span class="badge badge-tech">technical loss</span>' : r.status === "DRAW" ? '<span class="badge">draw</span>' : '<span class="badge badge-win">win</span>');
    }
    return '<li class="feed-item' + (tech ? " tech" : "") + (!r ? " running" : "") + (fresh ? " fresh" : "") + '" data-match="' + esc(m.match_id) + '">' +
      '<a href="' + matchUrl(m.match_id) + '"><span class="feed-id">' + esc(m.match_id) + '</span>' +
      '<span class="feed-players">' + side(m, m.player_a) + '<span class="vs">vs</span>' + side(m, m.player_b) + '</span>' +
      '<span class="feed-result">' + outcome + '</span></a></li>';
  }

  function renderFeed(matches) {
    if (!matches.length) { $("feed").innerHTML = '<li class="empty-row">No matches played yet.</li>'; return; }
    $("feed").innerHTML = matches.map(function (m) {
      var key = m.match_id + ":" + m.status, fresh = !seenMatches[key];
      seenMatches[key] = true;
      return feedItem(m, fresh);
    }).join("");
  }

  function renderProgress(p) {
    $("progress-bar").style.width = p.percent + "%";
    $("progress-text").textContent = p.matches_finished + " of " + p.matches_total + " matches · round " +
      p.current_round + " of " + p.rounds_total + (p.matches_running ? " · " + p.matches_running + " running" : "");
  }

  function renderRounds(rounds) {
    if (!rounds.length) { $("schedule").innerHTML = '<p class="muted">The schedule is drawn when the league starts.</p>'; return; }
    $("schedule").innerHTML = rounds.map(function (r) {
      return '<div class="round round-' + r.status.toLowerCase() + '"><div class="round-head"><strong>Round ' + r.number +
        '</strong><span class="muted small">' + r.matches_finished + "/" + r.matches_total + " · " + r.status.toLowerCase() + '</span></div><ul>' +
        r.matches.map(function (m) {
          return '<li class="sm-' + m.status.toLowerCase() + '"><a href="' + matchUrl(m.match_id) + '"><span class="sdot"></span>' +
            esc(m.match_id) + ' <span class="muted">' + esc(m.player_a) + "–" + esc(m.player_b) + '</span></a></li>';
        }).join("") + "</ul></div>";
    }).join("");
  }

  function renderHead(s) {
    var el = $("league-status");
    el.textContent = s.league.status;
    el.className = "status status-" + s.league.status.toLowerCase();
    $("league-note").textContent = s.note;
  }

  // -- chart ------------------------------------------------------------------------------
  var palette = ["#4f46e5", "#0f9d58", "#d93025", "#f4b400", "#0891b2", "#9333ea", "#ea580c", "#64748b",
                 "#db2777", "#65a30d", "#2563eb", "#b45309"];
  var chart = null;
  function chartData(c) {
    return {
      labels: c.rounds,
      datasets: c.series.map(function (s, i) {
        var color = palette[i % palette.length];
        return { label: s.display_name, data: s.points, borderColor: color, backgroundColor: color, pointRadius: 3, borderWidth: 2 };
      })
    };
  }
  function renderChart(c) {
    $("chart-empty").hidden = c.rounds.length > 0;
    if (typeof Chart === "undefined") return;
    if (!chart) {
      chart = new Chart($("chart"), {
        type: "line",
        data: chartData(c),
        options: {
          animation: false, responsive: true, maintainAspectRatio: false,
          interaction: { mode: "nearest", intersect: false },
          scales: { y: { beginAtZero: true, ticks: { precision: 0 }, title: { display: true, text: "points" } } },
          plugins: { legend: { position: "bottom", labels: { boxWidth: 10, usePointStyle: true, display: c.series.length <= 24 } } }
        }
      });
    } else {
      chart.data = chartData(c);
      chart.update();
    }
  }

  function render(s, animate) {
    var previous = animate ? state.standings : null;
    renderHead(s);
    renderProgress(s.progress);
    renderStandings(s.standings, previous);
    renderFeed(s.recent_matches);
    renderRounds(s.rounds);
    renderChart(s.chart);
    state = s;
    root.dataset.version = String((Number(root.dataset.version) || 0) + 1);
  }

  // -- catching up from the REST API --------------------------------------------------------
  var refreshTimer = null, inFlight = false, again = false;
  function refresh() {
    if (inFlight) { again = true; return; }
    inFlight = true;
    fetch(apiUrl, { headers: { Accept: "application/json" }, cache: "no-store" })
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.json(); })
      .then(function (s) { render(s, true); })
      .catch(function () { /* the next event or reconnect tries again */ })
      .then(function () { inFlight = false; if (again) { again = false; scheduleRefresh(); } });
  }
  function scheduleRefresh() {
    clearTimeout(refreshTimer);
    refreshTimer = setTimeout(refresh, 150);
  }

  // -- the websocket ----------------------------------------------------------------------
  var live = $("live"), socket = null, attempt = 0;
  function setLive(stateName, label) { live.dataset.state = stateName; live.querySelector(".live-label").textContent = label; }
  function connect() {
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    socket = new WebSocket(scheme + location.host + "/ws/leagues/" + encodeURIComponent(leagueId) + "/");
    window.leagueSocket = socket;  // lets people (and tests) poke at the connection
    socket.onopen = function () {
      attempt = 0;
      setLive("live", "live");
      root.dataset.connections = String((Number(root.dataset.connections) || 0) + 1);
    };
    socket.onmessage = function (ev) {
      var msg;
      try { msg = JSON.parse(ev.data); } catch (e) { return; }
      if (msg.type === "snapshot" && msg.data) {
        render(msg.data, true);
        refresh();  // the snapshot is current; refresh only covers events raced with it
      } else if (msg.type === "event") {
        root.dataset.lastEvent = msg.event || "";
        scheduleRefresh();
      }
    };
    socket.onclose = function () {
      setLive("reconnecting", "reconnecting");
      var delay = Math.min(10000, 500 * Math.pow(2, attempt)) * (0.75 + Math.random() * 0.5);
      attempt += 1;
      setTimeout(connect, delay);
    };
  }
  renderChart(state.chart);
  connect();
  // A slow safety net for events that cannot reach this process (a conductor in another process
  // without a shared Redis channel layer): re-read the snapshot now and then while in play.
  setInterval(function () {
    var active = ["REGISTERING", "READY", "RUNNING"].indexOf(state.league.status) >= 0;
    if (active && !document.hidden) scheduleRefresh();
  }, 15000);
  document.addEventListener("visibilitychange", function () { if (!document.hidden) scheduleRefresh(); });
})();
