/* Live league page: a websocket per league (ws/leagues/<id>/) sends the league's snapshot on
 * connect, then pushes a patch from one version to the next as the league changes (at most a few
 * a second, however busy the league; league/consumers.py). The page applies each patch to its
 * state (applyPatch, the other half of league/api/live.py's diff) and redraws what it touched:
 * header, notes, the "How to join" panel, standings, feed, crosstable, schedule and chart. It
 * never polls: a patch that does not follow its version asks the socket for the snapshot again.
 * After a drop the socket reconnects with exponential backoff and starts from a new snapshot.
 * "Follow" highlights one player everywhere (kept in the address as #follow=P03). */
(function () {
  "use strict";
  var root = document.getElementById("league-page");
  if (!root) return;
  var leagueId = root.dataset.league;
  var matchUrl = function (id) { return root.dataset.matchUrl.replace("MATCH", encodeURIComponent(id)); };
  var playerUrl = function (id) { return root.dataset.playerUrl.replace("PLAYER", encodeURIComponent(id)); };
  var state = JSON.parse(document.getElementById("snapshot").textContent);
  var seenMatches = {};
  (state.recent_matches || []).forEach(function (m) { seenMatches[m.match_id + ":" + m.status] = true; });
  var site = window.leagueSite;  // site.js, loaded first on every page (templates/base.html)

  function esc(text) {
    return String(text == null ? "" : text).replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c];
    });
  }
  function $(id) { return document.getElementById(id); }
  function timeTag(iso, fmt) {
    if (!iso) return "–";
    return '<time class="local" datetime="' + esc(iso) + '" data-format="' + (fmt || "datetime") + '" title="' +
      esc(iso.slice(0, 10) + " " + iso.slice(11, 19)) + ' UTC">' + esc(iso.slice(11, 16)) + " UTC</time>";
  }

  // -- follow a player ----------------------------------------------------------------------
  var followed = (location.hash.match(/follow=([^&]+)/) || [])[1];
  followed = followed ? decodeURIComponent(followed) : "";
  function isFollowed(ids) { return followed && ids.indexOf(followed) >= 0; }
  function applyFollow() {
    root.dataset.follow = followed;
    document.querySelectorAll("#league-page [data-players]").forEach(function (el) {
      el.classList.toggle("followed", isFollowed(el.dataset.players.split(" ")));
    });
    document.querySelectorAll("#standings-body tr[data-player], #crosstable tr[data-player], #crosstable th[data-player]").forEach(function (el) {
      el.classList.toggle("followed", !!followed && el.dataset.player === followed);
    });
    var select = $("follow");
    if (select && select.value !== followed) select.value = followed;
    if (chart) { chart.data = chartData(state.chart); chart.update(); }
  }
  function renderFollowOptions(rows) {
    var select = $("follow");
    select.innerHTML = '<option value="">no one</option>' + rows.map(function (r) {
      return '<option value="' + esc(r.player_id) + '">' + esc(r.display_name) + " (" + esc(r.player_id) + ")</option>";
    }).join("");
    select.value = followed;
  }
  $("follow").addEventListener("change", function (ev) {
    followed = ev.target.value;
    history.replaceState(null, "", followed ? "#follow=" + encodeURIComponent(followed) : location.pathname + location.search);
    applyFollow();
  });

  // -- rendering (same markup as the server templates) ------------------------------------
  function standingRow(r, changed) {
    var move = "";
    if (r.rank_change) {
      var up = r.rank_change > 0;
      move = '<span class="move ' + (up ? "up" : "down") + '" title="' + (up ? "up" : "down") +
        ' since the latest round began">' + (up ? "▲" : "▼") + Math.abs(r.rank_change) + "</span>";
    }
    var tb = "";
    if (r.tie_break) {
      tb = ' <span class="tb" data-rule="' + esc(r.decided_by) + '" title="Below the player above on the tie-break">tie-break: ' +
        esc(r.tie_break) + "</span>";
    }
    var rating = r.arena_rating == null ? "" : ' <span class="arena-rating" title="arena rating (mu - 3 sigma)">rating ' + esc(r.arena_rating) + "</span>";
    var form = (r.form || []).map(function (f) {
      return '<span class="fm fm-' + esc(f.mark) + (f.technical ? " fm-tech" : "") + '" title="' + esc(f.match_id + " " + f.score) + '">' + esc(f.mark) + "</span>";
    }).join("");
    return '<tr data-player="' + esc(r.player_id) + '"' + (changed ? ' class="changed"' : "") + '>' +
      '<td class="rank">' + r.rank + move + '</td>' +
      ("seed" in r ? '<td class="seed">' + (r.seed == null ? "–" : r.seed) + "</td>" : "") +
      '<td class="left"><a href="' + playerUrl(r.player_id) + '">' + esc(r.display_name) + '</a> <span class="muted small">' + esc(r.player_id) + "</span>" + rating + tb + "</td>" +
      '<td>' + r.played + '</td><td>' + r.wins + '</td><td>' + r.draws + '</td><td>' + r.losses + '</td>' +
      '<td class="hide-sm">' + r.technical_losses + '</td><td class="points">' + r.points + '</td>' +
      (r.buchholz != null ? '<td class="buchholz" title="Buchholz' + (r.byes ? "; " + r.byes + " bye" + (r.byes > 1 ? "s" : "") : "") + '">' + r.buchholz + "</td>" : "") +
      '<td class="hide-sm form">' + form + "</td></tr>";
  }
  function renderStandings(rows, previous) {
    var before = {};
    (previous || []).forEach(function (r) { before[r.player_id] = r.points + ":" + r.rank; });
    if (!rows.length) { $("standings-body").innerHTML = '<tr class="empty-row"><td colspan="9">No players registered yet.</td></tr>'; return; }
    $("standings-body").innerHTML = rows.map(function (r) {
      return standingRow(r, previous && before[r.player_id] !== r.points + ":" + r.rank);
    }).join("");
  }

  function side(m, p) {
    var r = m.result, win = r && r.winner === p.player_id, choice = r && r.choices ? r.choices[p.player_id] : null;
    return '<span class="pl' + (win ? " win" : "") + '"><span class="nm">' + esc(p.display_name) + "</span>" + (choice != null ? ' <i class="choice">' + esc(choice) + '</i>' : "") + '</span>';
  }

  function feedItem(m, fresh) {
    var r = m.result, tech = r && r.technical_loss && r.technical_loss.length, outcome;
    if (!r) outcome = '<span class="badge badge-run">playing</span>';
    else {
      outcome = (r.drawn_number != null ? '<span class="drawn" title="drawn number">' + esc(r.drawn_number) + '</span>' : "") +
        (r.games_score ? '<span class="score" title="games won">' + esc(r.label) + "</span>" : "") +
        (tech ? '<span class="badge badge-tech">technical loss</span>' : r.status === "DRAW" ? '<span class="badge">draw</span>' : '<span class="badge badge-win">win</span>');
    }
    return '<li class="feed-item' + (tech ? " tech" : "") + (!r ? " running" : "") + (fresh ? " fresh" : "") + '" data-match="' + esc(m.match_id) +
      '" data-players="' + esc(m.player_a.player_id + " " + m.player_b.player_id) + '">' +
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
    // Before the schedule is drawn there is nothing to count ("0 of 0 matches" said nothing).
    $("progress-text").textContent = !p.matches_total ? "No matches until the league starts." :
      p.matches_finished + " of " + p.matches_total + " matches · round " + p.current_round + " of " + p.rounds_total +
      (p.matches_running ? " · " + p.matches_running + " running" : "");
  }

  // A big league's page lists the matches of the rounds in play only (league/api/readmodel.py,
  // page_rounds); another round's are fetched when a viewer asks, and kept: a round that is
  // not in play does not change.
  var fetchedRounds = {};
  function scheduledMatch(m) {
    var res = m.result, w = res ? res.winner : null;
    return '<li class="sm-' + m.status.toLowerCase() + '" data-players="' + esc(m.player_a + " " + m.player_b) + '"><a href="' + matchUrl(m.match_id) +
      '" title="' + esc(m.match_id + ": " + m.player_a + " vs " + m.player_b) + '"><span class="sdot"></span><span class="sm-names">' +
      '<span class="' + (w === m.player_a ? "sw" : "") + '">' + esc(m.player_a_name) + '</span> <span class="muted">–</span> ' +
      '<span class="' + (w === m.player_b ? "sw" : "") + '">' + esc(m.player_b_name) + "</span></span>" +
      (res ? ' <span class="sm-score' + (res.technical ? " tech" : "") + '">' + esc(res.label) + "</span>" : "") + "</a></li>";
  }
  function renderRounds(rounds) {
    if (!rounds.length) { $("schedule").innerHTML = '<p class="muted wide">The schedule is drawn when the league starts.</p>'; return; }
    $("schedule").innerHTML = rounds.map(function (r) {
      var matches = r.matches || fetchedRounds[r.number];
      var list = matches ? "<ul>" + matches.map(scheduledMatch).join("") + "</ul>" :
        '<button type="button" class="round-more" data-round="' + r.number + '">Show its ' + r.matches_total + " matches</button>";
      return '<div class="round round-' + r.status.toLowerCase() + '"><div class="round-head"><strong>Round ' + r.number +
        '</strong><span class="muted small">' + r.matches_finished + "/" + r.matches_total + " · " + r.status.toLowerCase() + "</span></div>" + list + "</div>";
    }).join("");
  }
  $("schedule").addEventListener("click", function (ev) {
    var button = ev.target.closest("button.round-more");
    if (!button) return;
    button.disabled = true;
    var number = button.dataset.round;
    fetch("/api/leagues/" + encodeURIComponent(leagueId) + "/schedule/?round=" + number, { headers: { Accept: "application/json" } })
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.json(); })
      .then(function (found) {
        if (found.length) fetchedRounds[number] = found[0].matches;
        renderRounds(state.rounds);
        applyFollow();
      })
      .catch(function () { button.disabled = false; });
  });

  function renderCrosstable(x) {
    var box = $("crosstable");
    if (!x) { box.innerHTML = '<p class="muted">Too many players for a grid: each player\'s page lists its results.</p>'; markCrosstableScroll(); return; }
    if (!x.rows.length) { box.innerHTML = '<p class="muted">The grid fills in once players have registered.</p>'; markCrosstableScroll(); return; }
    var head = '<tr><th class="left">Player</th>' + x.rows.map(function (p, i) {
      return '<th title="' + esc(p.display_name + " (" + p.player_id + ")") + '" data-player="' + esc(p.player_id) + '">' + (i + 1) + "</th>";
    }).join("") + "</tr>";
    var body = x.rows.map(function (p, i) {
      return '<tr data-player="' + esc(p.player_id) + '"><th class="left">' + (i + 1) + ". " + esc(p.display_name) + "</th>" +
        p.cells.map(function (cell) {
          if (cell === null) return '<td class="self"></td>';
          if (!cell.length) return '<td><span class="muted">·</span></td>';
          return "<td>" + cell.map(function (c) {
            return '<a class="xc xc-' + esc(c.mark) + (c.technical ? " xc-tech" : "") + '" href="' + matchUrl(c.match_id) + '" title="' +
              esc(c.match_id + ": " + c.score) + '">' + esc(c.mark) + "</a>";
          }).join("") + "</td>";
        }).join("") + "</tr>";
    }).join("");
    box.innerHTML = '<table class="table cross"><thead>' + head + "</thead><tbody>" + body + "</tbody></table>";
    markCrosstableScroll();
  }

  // "scroll →" only when the grid is wider than its box (a phone, many players): a hint over a
  // grid that fits sends the eye looking for columns that are not there.
  function markCrosstableScroll() {
    var box = $("crosstable");
    $("crosstable-hint").classList.toggle("needed", box.scrollWidth > box.clientWidth + 1);
  }
  window.addEventListener("resize", markCrosstableScroll);

  function renderJoin(join) {
    var panel = $("join");
    panel.hidden = !join;
    if (!join) return;
    $("join-closes").innerHTML = timeTag(join.closes_at, "time");
    $("join-countdown").dataset.until = join.closes_at || "";
    $("join-agents").innerHTML = join.agents.length ? join.agents.map(function (a) {
      return '<li class="agent agent-' + esc(a.state) + '"><span class="sdot"></span><strong>' + esc(a.display_name) + '</strong> <span class="muted small">' +
        esc(a.player_id) + (a.endpoint ? " · " + esc(a.endpoint) : "") + '</span> <span class="agent-why">' + esc(a.summary) + "</span></li>";
    }).join("") : '<li class="empty-row">No agent has registered yet.</li>';
  }

  function renderHead(s) {
    var el = $("league-status");
    el.textContent = s.league.status;
    el.className = "status status-" + s.league.status.toLowerCase();
    $("league-note").textContent = s.note;
    $("count-players").textContent = s.league.players_text;
    $("count-referees").textContent = s.league.referees_text;
    var warning = $("referee-warning");
    warning.hidden = !s.referee_warning;
    warning.textContent = s.referee_warning || "";
    $("tie-rule").textContent = s.tie_break_rule;
  }

  // -- the join command, with the student's own address -----------------------------------
  // The command comes with '<YOUR-AGENT-URL>' outside its quotes (the shell refuses to run it);
  // an address typed here takes its place. Only a plain http(s) URL: it lands inside a quoted
  // JSON string, where a quote or a backslash would break the command.
  var PLACEHOLDER = "'<YOUR-AGENT-URL>'", AGENT_URL = /^https?:\/\/[^\s'"\\<>`$]+$/;
  var curlBox = $("join-curl"), urlField = $("join-agent-url"), curlTemplate = curlBox ? curlBox.textContent : "";
  if (urlField) urlField.addEventListener("input", function () {
    var url = urlField.value.trim(), ok = AGENT_URL.test(url);
    $("join-url-error").hidden = !url || ok;
    curlBox.textContent = ok ? curlTemplate.split(PLACEHOLDER).join(url) : curlTemplate;
  });

  // -- chart ------------------------------------------------------------------------------
  // Twelve hand-picked colours, then evenly spread hues with a dash pattern per lap, so no two
  // players of a big league share a line.
  var palette = ["#4f46e5", "#0f9d58", "#d93025", "#f4b400", "#0891b2", "#9333ea", "#ea580c", "#64748b",
                 "#db2777", "#65a30d", "#2563eb", "#b45309"];
  var DASHES = [[], [6, 3], [2, 3], [8, 3, 2, 3]];
  function lineStyle(i, n) {
    if (i < palette.length) return { color: palette[i], dash: [] };
    var extra = n - palette.length, j = i - palette.length;
    var hue = Math.round((j * 360 / Math.max(1, Math.min(extra, 18)) + 15) % 360);
    return { color: "hsl(" + hue + ", 65%, " + (j % 2 ? 38 : 48) + "%)", dash: DASHES[(Math.floor(j / 18) + 1) % DASHES.length] };
  }
  var chart = null;
  // Past this many lines a chart of every colour is a tangle: only the leaders (and the
  // followed player) keep theirs, the others are thin grey lines.
  var CHART_ALL_COLOURS = 6, CHART_LEADERS = 3;
  function chartData(c) {
    var n = c.series.length, leaders = {};
    (state.standings || []).slice(0, CHART_LEADERS).forEach(function (r) { leaders[r.player_id] = true; });
    return {
      labels: c.rounds,
      datasets: c.series.map(function (s, i) {
        var style = lineStyle(i, n), me = followed && s.player_id === followed;
        var shown = followed ? me || (n > CHART_ALL_COLOURS && leaders[s.player_id]) : n <= CHART_ALL_COLOURS || leaders[s.player_id];
        var color = shown ? style.color : "rgba(160, 166, 180, 0.35)";
        return { label: s.display_name, data: s.points, borderColor: color, backgroundColor: color, borderDash: style.dash,
                 pointRadius: me ? 4 : shown ? 3 : 0, borderWidth: me ? 4 : shown ? 2.5 : 1, order: me ? 0 : shown ? 1 : 2 };
      })
    };
  }
  function renderChart(c) {
    $("chart-empty").hidden = c.rounds.length > 0;
    $("chart").parentNode.hidden = c.rounds.length === 0;
    if (typeof Chart === "undefined") return;
    if (!chart) {
      // Axis text and grid in the page's own colours (light or dark theme).
      var css = getComputedStyle(document.documentElement);
      Chart.defaults.color = css.getPropertyValue("--muted").trim() || Chart.defaults.color;
      Chart.defaults.borderColor = css.getPropertyValue("--line").trim() || Chart.defaults.borderColor;
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
      window.leagueChart = chart;
    } else {
      chart.data = chartData(c);
      chart.update();
    }
  }

  // Each section of the page and the parts of the snapshot it is drawn from.
  var SECTIONS = [
    [["league", "note", "referee_warning", "tie_break_rule"], function (s) { renderHead(s); }],
    [["join"], function (s) { renderJoin(s.join); }],
    [["progress"], function (s) { renderProgress(s.progress); }],
    [["recent_matches"], function (s) { renderFeed(s.recent_matches); }],
    [["crosstable"], function (s) { renderCrosstable(s.crosstable); }],
    [["rounds"], function (s) { renderRounds(s.rounds); }],
    [["chart"], function (s) { renderChart(s.chart); }]
  ];
  // ``changed``: the parts of the snapshot a patch touched (all of them for a new snapshot).
  function render(s, animate, changed) {
    var previous = animate ? state.standings : null;
    state = s;
    SECTIONS.forEach(function (section) {
      if (!changed || section[0].some(function (part) { return part in changed; })) section[1](s);
    });
    if (!changed || "standings" in changed) {
      renderStandings(s.standings, previous);
      // The leader's gold rank once a match has been played, not in a table of zeros.
      $("standings-body").classList.toggle("ranked", s.progress.matches_finished > 0);
      if ($("follow").options.length !== s.standings.length + 1) renderFollowOptions(s.standings);
    }
    applyFollow();
    site.localize(root);
    site.tick();
    root.dataset.version = String((Number(root.dataset.version) || 0) + 1);
  }

  // -- patches (the other half of league/api/live.py's diff: site.js's applyPatch) -----------
  var applyPatch = site.applyPatch;
  var version = root.dataset.at || null;  // the version the page shows (rendered at, then patched to)
  var synced = false;  // whether this socket has brought the page to the server's version
  function showViewers(n) {
    if (typeof n !== "number") return;
    $("viewers").hidden = false;
    $("viewers-count").textContent = n === 1 ? "1 watching" : n + " watching";
    root.dataset.viewers = String(n);
  }
  function resync() {
    if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ type: "snapshot" }));
  }
  function receive(msg) {
    showViewers(msg.viewers);
    if (msg.type === "snapshot" && msg.data) {
      version = msg.version;
      synced = true;
      render(msg.data, true);
      return;
    }
    if (msg.type !== "patch") return;
    if (msg.events && msg.events.length) root.dataset.lastEvent = msg.events[msg.events.length - 1].event || "";
    if (msg.version === version) {
      // Already there: a snapshot sent as this patch went out, or a page that was current when
      // its socket opened (the server's first message then carries no data), shown as live.
      if (!synced) { synced = true; render(state, true); }
      return;
    }
    if (msg.from !== version || !msg.data) { resync(); return; }
    var next;
    try { next = applyPatch(state, msg.data); } catch (e) { resync(); return; }  // the snapshot instead
    version = msg.version;
    synced = true;
    render(next, true, "$d" in msg.data ? msg.data.$d : null);
  }
  // A registration window that closes changes the page without any event (site.js's countdown):
  // the server sees it within its poll; a tab that wakes takes the snapshot again.
  document.addEventListener("league:stale", resync);
  document.addEventListener("visibilitychange", function () { if (!document.hidden) resync(); });

  // -- the websocket ----------------------------------------------------------------------
  function textOf(data) {
    if (typeof data === "string") return Promise.resolve(data);
    var inflated = new Blob([data]).stream().pipeThrough(new DecompressionStream("deflate"));
    return new Response(inflated).text();
  }
  var live = $("live"), socket = null, attempt = 0;
  function setLive(stateName, label) { live.dataset.state = stateName; live.querySelector(".live-label").textContent = label; }
  function connect() {
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    // Patches come compressed (binary frames) where the browser can undo it.
    var deflate = typeof DecompressionStream === "function";
    // The version the page shows: the server sends what changed since, not the whole snapshot.
    var asked = new URLSearchParams();
    if (deflate) asked.set("deflate", "1");
    if (version) asked.set("at", version);
    synced = false;
    socket = new WebSocket(scheme + location.host + "/ws/leagues/" + encodeURIComponent(leagueId) + "/?" + asked);
    socket.binaryType = "arraybuffer";
    window.leagueSocket = socket;  // lets people (and tests) poke at the connection
    socket.onopen = function () {
      attempt = 0;
      setLive("live", "live");
      root.dataset.connections = String((Number(root.dataset.connections) || 0) + 1);
    };
    // Messages are taken in the order they came, a compressed one once it is inflated.
    var inbox = Promise.resolve();
    socket.onmessage = function (ev) {
      inbox = inbox.then(function () { return textOf(ev.data); }).then(function (text) {
        var msg;
        try { msg = JSON.parse(text); } catch (e) { return; }
        receive(msg);
      }).catch(function () { /* a frame that does not inflate: the next patch asks for the snapshot */ });
    };
    socket.onclose = function () {
      setLive("reconnecting", "reconnecting");
      var delay = Math.min(10000, 500 * Math.pow(2, attempt)) * (0.75 + Math.random() * 0.5);
      attempt += 1;
      setTimeout(connect, delay);
    };
  }
  renderChart(state.chart);
  renderCrosstable(state.crosstable);  // the server leaves these two to the script
  renderRounds(state.rounds);
  applyFollow();
  connect();
})();
