// The dashboard page: a WebSocket fed by the dashboard server (streaming/dashboard/server.py), drawn with DOM calls.
// Every name from the checker, the graph or a stream is set with textContent (never innerHTML), so a step named
// "<script>" shows as text. The server pushes: "snapshot" (everything, on connect and after falling behind),
// "alert", "update" (a later copy of it that says something new), "retraction", "ack" (one alert each), "tiles"
// (changed streams), "gone" (streams whose tiles the dashboard dropped), "finished" (a session that ended, or more
// of it: its end report, its last status), "link" (the checker link's state),
// "name_conflict" (the dashboard's --graph names a step otherwise than the checker: the graph drawn is not the
// checker's, so it is not marked).
"use strict";

const state = {
  alerts: new Map(),     // id -> alert record, as the server sent it
  shownAt: new Map(),    // id -> when this page first showed it (Unix seconds), kept across reconnections
  tiles: new Map(),      // stream id -> tile record
  finished: new Map(),   // stream id + run -> ended session, oldest first: they outlive their tiles
  maxFinished: 100,
  names: {},             // step id -> name
  maxAlerts: 500,
  selected: null,        // the alert marked on the graph (null: the newest)
  graph: null,           // {svg: bool, steps: [...]}
  graphDrawn: false,
  socket: null,
  pageLive: false,       // the push channel is open: without it nothing the page shows is current
  heardAt: 0,            // when the push channel last brought anything (performance.now(), ms)
  retryMs: 500,
  link: null,
  conflicts: [],         // steps the --graph names otherwise than the checker: {step, graph_name, checker_name}
  forgottenOpen: 0,      // alerts the dashboard no longer keeps that nobody acknowledged (the server's count)
  footer: "",            // the footer as the dashboard last told it
  footerAt: null,        // when (Unix seconds)
};

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

// A wall time as HH:MM:SS, with its day when that is not today: the page keeps alerts for days on a site that runs
// day and night, and yesterday's alert read as if raised today. A peer's time beyond what a Date holds reads as the
// terminal view writes it.
function clock(seconds) {
  if (seconds === null || seconds === undefined) return "-";
  const when = new Date(seconds * 1000);
  if (Number.isNaN(when.getTime())) return "--:--:--";
  const time = when.toLocaleTimeString([], {hour12: false});
  const today = new Date();
  if (when.toDateString() === today.toDateString()) return time;
  const day = {day: "numeric", month: "short"};
  if (when.getFullYear() !== today.getFullYear()) day.year = "numeric";
  return `${time}, ${when.toLocaleDateString([], day)}`;
}

// The day the page's times were drawn on: past midnight they are drawn again, as the times of the day before must now
// say their day (drawn once, a page left open on a wall screen showed yesterday's alerts as raised today).
let drawnDay = new Date().toDateString();

function watchDay() {
  const today = new Date().toDateString();
  if (today === drawnDay) return;
  drawnDay = today;
  for (const alert of state.alerts.values()) {
    const existing = document.querySelector(`#alert-feed li[data-id="${alert.id}"]`);
    if (existing) replaceCard(existing, alertCard(alert));
  }
  [...state.tiles.values()].forEach(updateTile); // "LOST since", "last heard"
  [...state.finished.values()].forEach(addFinished);
}

function videoTime(seconds) {
  if (seconds === null || seconds === undefined) return "unknown";
  const minutes = Math.floor(seconds / 60);
  const rest = (seconds - 60 * minutes).toFixed(1).padStart(4, "0");
  return `${minutes}:${rest}`;
}

function percent(p) {
  return `${Math.round(p * 100)}%`;
}

// An allowed step's chance of coming next: one under half a percent is not "0%", which reads as "it cannot come
// next" (as a score of 0, named without a number, did), yet the step is allowed and the rule gives it a chance.
function chance(p) {
  return p > 0 && p < 0.005 ? "<1%" : percent(p);
}

function stepName(step) {
  if (step === null || step === undefined) return "-";
  return state.names[String(step)] ?? String(step);
}

// -- the push channel ---------------------------------------------------------------------------------------------
// The dashboard pushes the checker link's state every second: a channel silent this long has lost the dashboard,
// though its socket may look open for ever (the dashboard's machine powered off or frozen, a link cut on the way:
// no close ever reaches the page, which said "page live" and every stream LIVE for as long as that lasted). The
// same bound holds for a connection the dashboard never answers. Not shorter: a message arrives whole, and on a slow
// link a snapshot of 500 alerts may take seconds, which the dashboard allows for up to 10 s (SEND_TIMEOUT_S), so a
// page that gave up sooner would ask for the same snapshot again and again.
const SILENT_MS = 12000;

function connect() {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const socket = new WebSocket(`${scheme}://${location.host}/ws`);
  state.socket = socket;
  state.heardAt = performance.now();
  socket.onopen = () => {
    state.heardAt = performance.now();
    state.retryMs = 500;
    state.pageLive = true;
    // The dashboard may have restarted with another --graph: the new connection's snapshot draws its graph.
    state.graphDrawn = false;
    setBadge("page-link", true, "\u25cf page live");
  };
  socket.onmessage = (event) => {
    if (state.socket !== socket) return; // given up as silent: what it brings late is not current
    state.heardAt = performance.now();
    let message;
    try {
      message = JSON.parse(event.data);
    } catch (err) {
      return;
    }
    handle(message);
  };
  socket.onclose = () => dropped(socket);
}

// The push channel is gone (closed, or given up as silent): say so once, and try again later.
function dropped(socket) {
  if (state.socket !== socket) return; // given up as silent already: its close, when it comes, changes nothing
  state.socket = null;
  if (state.pageLive) {
    state.pageLive = false;
    setBadge("page-link", false, "\u21bb dashboard not answering: reconnecting\u2026");
    pageLost();
  }
  retryLater();
}

// The next try after 0.5 s, then 1, 2, 4, and every 5 s from then on (reset once a connection opens).
function retryLater() {
  setTimeout(reconnect, state.retryMs);
  state.retryMs = Math.min(5000, state.retryMs * 2);
}

function watchSilence() {
  const socket = state.socket;
  if (socket === null || performance.now() - state.heardAt < SILENT_MS) return;
  dropped(socket);
  socket.close();
}

// A WebSocket refused with 401 (the dashboard restarted with another token) fails exactly like one to a dashboard
// that is down, and the page said "not answering" for ever: a plain request tells them apart, and a refused page
// says what would let it in.
async function reconnect() {
  let status = 0;
  try {
    status = (await fetch("/static/style.css", {method: "HEAD", cache: "no-store", credentials: "same-origin",
                                                signal: AbortSignal.timeout(SILENT_MS)})).status;
  } catch (err) {
    status = 0; // no answer at all (or none in time): the dashboard is down, frozen or unreachable
  }
  if (status === 401) {
    setBadge("page-link", false, "\u2716 the dashboard refuses this page (its token changed?): open it again as " +
                                 "/?token=TOKEN");
    retryLater();
  } else if (status === 0) {
    setBadge("page-link", false, "\u21bb dashboard not answering: reconnecting\u2026");
    retryLater();
  } else {
    connect();
  }
}

// Without the dashboard the page hears nothing: the checker's link and every stream that has not ended were shown as
// last told ("checker connected", "LIVE") for as long as the dashboard was away.
function pageLost() {
  setBadge("checker-link", false, "? checker: unknown (this page has lost the dashboard)");
  [...state.tiles.values()].forEach(updateTile);
  showCounts(); // with no tile to redraw, the empty list's reason would stay as last told
  // The footer's figures stopped moving with the dashboard: read as current, a silent checker looked idle.
  if (state.footer) {
    document.getElementById("footer").textContent =
      `this page has lost the dashboard; as last told at ${clock(state.footerAt)}: ${state.footer}`;
  }
}

function send(message) {
  if (!state.socket || state.socket.readyState !== WebSocket.OPEN) return false;
  state.socket.send(JSON.stringify(message));
  return true;
}

function handle(message) {
  switch (message.type) {
    case "snapshot": return snapshot(message);
    case "alert":
      // The alert may have pushed out one nobody acknowledged: counted with it, not a second later with the link.
      if (typeof message.forgotten_open === "number") state.forgottenOpen = message.forgotten_open;
      return addAlert(message.alert, true);
    case "update":
    case "retraction":
    case "ack": return updateAlert(message.alert);
    case "tiles": return message.tiles.forEach(updateTile);
    case "gone": return message.streams.forEach(removeTile);
    case "finished": return addFinished(message.session);
    case "link": return showLink(message);
    case "name_conflict": return addConflict(message);
    default: return undefined;
  }
}

function snapshot(message) {
  state.pageLive = true;
  state.names = message.names || {};
  state.maxAlerts = message.max_alerts || state.maxAlerts;
  state.forgottenOpen = message.forgotten_open || 0;
  if (state.selected !== null) {
    // A restarted dashboard numbers its alerts afresh: the number selected may now be another stream's alert, which
    // was then marked and framed as the one the user had picked. The selection follows the alert itself, named by
    // the checker's alert id within its stream and run (and its step: after a retraction the id is another mistake's).
    const chosen = state.alerts.get(state.selected);
    const same = (a, b) => a.stream === b.stream && a.run === b.run && a.alert_id === b.alert_id && a.step === b.step;
    const again = chosen && message.alerts.find((alert) => same(alert, chosen));
    state.selected = again ? again.id : null;
  }
  state.alerts.clear();
  clearUnseen(); // its card goes with the rest: what the snapshot brings is not news of this moment
  document.getElementById("alert-feed").replaceChildren();
  // Oldest first, each added on top: the newest ends first.
  message.alerts.slice().reverse().forEach((alert) => addAlert(alert, false));
  state.tiles.clear();
  document.getElementById("tiles").replaceChildren();
  message.tiles.forEach(updateTile);
  state.maxFinished = message.max_finished || state.maxFinished;
  state.finished.clear();
  document.getElementById("finished-list").replaceChildren();
  document.getElementById("see-finished").hidden = true;
  (message.finished || []).slice().reverse().forEach(addFinished);
  if (!state.graphDrawn) {
    state.graph = message.graph;
    drawGraph();
  }
  // A dashboard restarted with the checker's own graph has no conflict left: the old warning must go.
  state.conflicts = [];
  const banner = document.getElementById("name-warning");
  banner.hidden = true;
  banner.textContent = "";
  (message.name_conflicts || []).forEach(addConflict);
  showLink(message.link);
  markGraph();
}

// -- a --graph that is not the checker's ----------------------------------------------------------------------------
function addConflict(conflict) {
  if (state.conflicts.some((known) => known.step === conflict.step)) return;
  state.conflicts.push(conflict);
  const first = state.conflicts[0];
  const more = state.conflicts.length > 1 ? ` (and ${state.conflicts.length - 1} more step(s))` : "";
  const banner = document.getElementById("name-warning");
  banner.textContent = `\u26a0 The dashboard's task graph names step ${first.step} "${first.graph_name}", the ` +
    `checker calls it "${first.checker_name}"${more}: is the --graph the checker's graph? The checker's names are ` +
    "shown (a step it has not named yet, by its number), and the graph drawing is not marked.";
  banner.hidden = false;
  markGraph();
}

// -- the link badges ----------------------------------------------------------------------------------------------
function setBadge(id, good, text) {
  const badge = document.getElementById(id);
  badge.textContent = text;
  badge.classList.toggle("good", good);
  badge.classList.toggle("bad", !good);
}

function showLink(link) {
  if (!link) return;
  state.link = link;
  let text;
  if (link.refused) {
    text = `\u2716 checker refused this dashboard: ${link.refused}`;
  } else if (link.connected) {
    text = `\u25cf checker connected (${link.endpoint})`;
  } else {
    const heard = link.last_heard ? `last heard ${clock(link.last_heard)}` : "never heard";
    text = `\u2716 checker not answering at ${link.endpoint} (${heard}): reconnecting\u2026`;
  }
  setBadge("checker-link", link.connected && !link.refused, text);
  const health = link.health;
  const parts = [`${link.pages} page(s) open`];
  if (link.malformed) parts.push(`${link.malformed} undecodable message(s) skipped (last: ${link.last_error})`);
  if (health) {
    parts.push(`checker: ${health.received} messages received, ${health.malformed} malformed, ` +
               `${health.denied} handshakes refused`);
    // two detectors given one stream id: the second is turned away, and only this count says so
    if (health.stream_taken) parts.push(`${health.stream_taken} refused: stream id held by another live detector`);
  }
  if (link.skipped || link.dropped_pages) {
    parts.push(`slow pages: ${link.skipped} resent a snapshot, ${link.dropped_pages} closed`);
  }
  state.footer = parts.join(" \u00b7 ");
  state.footerAt = Date.now() / 1000;
  document.getElementById("footer").textContent = state.footer;
  if (typeof link.forgotten_open === "number") state.forgottenOpen = link.forgotten_open;
  showCounts();
}

function showCounts() {
  let live = 0, lost = 0, ended = 0, stopped = 0, silent = 0;
  for (const tile of state.tiles.values()) {
    const shown = tileState(tile);
    if (shown === "live") live += 1;
    else if (shown === "lost") lost += 1;
    else if (shown === "ended" && tile.stopped) stopped += 1;
    else if (shown === "ended") ended += 1;
    else silent += 1;
  }
  let open = 0;
  for (const alert of state.alerts.values()) if (alert.acked_at === null && !alert.retracted) open += 1;
  document.getElementById("counts").textContent =
    `${state.tiles.size} stream(s): ${live} live, ${lost} lost, ${silent} not answering, ${ended} ended` +
    (stopped ? `, ${stopped} stopped` : "") + " \u00b7 " +
    `${state.alerts.size} alert(s), ${open} not acknowledged` +
    (state.forgottenOpen > 0 ? ` (and ${state.forgottenOpen} older, no longer kept)` : "");
  document.getElementById("no-streams").hidden = state.tiles.size > 0;
  document.getElementById("no-streams-why").textContent = noStreamsText();
  document.getElementById("no-alerts").hidden = state.alerts.size > 0;
}

// Why no tile is shown. "No stream now: start a detector" was said also while the checker itself was down or not yet
// started, or the page had lost the dashboard: then nothing is known of the streams, and the advice pointed at the
// wrong program.
function noStreamsText() {
  const link = state.link;
  if (!state.pageLive) return "Streams unknown: this page has no link to the dashboard (see the badge above)";
  if (link && link.refused) return "Streams unknown: the checker refused this dashboard (see the badge above)";
  if (link && !link.connected && !link.last_heard) {
    return `Streams unknown: the checker at ${link.endpoint} has never answered this dashboard (is it running, ` +
           "and is this its --publish endpoint?)";
  }
  if (link && !link.connected) {
    return `No stream as last heard: the checker at ${link.endpoint} has not answered since ` +
           `${clock(link.last_heard)}, and it had no stream then`;
  }
  return "No stream now: start a detector that sends to this checker";
}

// -- alerts -------------------------------------------------------------------------------------------------------
function alertLabel(alert) {
  if (alert.retracted) return ["retracted", "\u21a9 RETRACTED"];
  if (alert.acked_at !== null) return ["acked", "\u2713 ACKNOWLEDGED"];
  return ["open", "\u26a0 ALERT"];
}

function alertCard(alert) {
  const [kind, label] = alertLabel(alert);
  const item = el("li", `alert ${kind}`);
  item.dataset.id = String(alert.id);
  item.dataset.published = String(alert.published);
  item.dataset.raised = String(alert.raised);
  item.dataset.videoTime = String(alert.video_time);
  item.dataset.shown = String(state.shownAt.get(alert.id));
  item.dataset.state = kind;
  item.tabIndex = 0;
  if (state.selected === alert.id) item.classList.add("selected");

  const head = el("div", "alert-head");
  head.append(el("span", "label", label), el("span", "step", alert.step_name),
              el("span", "stream", `stream ${alert.stream}`));
  item.append(head);

  const facts = el("dl", "facts");
  const fact = (name, value) => facts.append(el("dt", null, name), el("dd", null, value));
  if (alert.undefined) fact("missing", "(the step has no pre-conditions in the graph)");
  else fact("missing", alert.missing_names.join(", ") || "-");
  if (alert.forgotten) fact("likely forgotten", alert.forgotten);
  if (alert.late_for.length) fact("came after", alert.late_for.join(", "));
  fact("probability", percent(alert.probability));
  fact("video time", videoTime(alert.video_time));
  // When the checker raised it; "(re-sent)": this dashboard saw only the checker's re-sends of it (it started later).
  fact("raised", `${clock(alert.raised)}${alert.replayed ? " (re-sent)" : ""}`);
  if (alert.retracted) {
    const instead = alert.retracted.confirmed ? `it was ${alert.retracted.confirmed}` : "the step was not confirmed";
    fact("retracted", `${clock(alert.retracted.at)}: ${instead}`);
  }
  if (alert.acked_at !== null) fact("acknowledged", clock(alert.acked_at));
  item.append(facts);

  if (alert.frame) item.append(framePicture(alert));
  if (alert.acked_at === null && !alert.retracted) {
    const button = el("button", "ack", "Acknowledge");
    button.type = "button";
    button.addEventListener("click", (event) => {
      event.stopPropagation();
      if (!send({type: "ack", id: alert.id})) {
        // Nothing was sent: a button that said "Acknowledging..." until the page reconnected claimed otherwise.
        button.textContent = "Not sent (the dashboard is not answering): Acknowledge";
        return;
      }
      // A focused button that is disabled drops keyboard focus to the page's top: keep it on the alert.
      if (document.activeElement === button) item.focus();
      button.disabled = true;
      button.textContent = "Acknowledging\u2026";
    });
    item.append(button);
  }
  item.addEventListener("click", () => select(alert.id));
  item.addEventListener("keydown", (event) => {
    // Enter on the Acknowledge button bubbles here too: it acknowledges, it must not also (un)select the alert.
    if (event.key === "Enter" && event.target === item) select(alert.id);
  });
  return item;
}

function framePicture(alert) {
  const figure = el("figure", "frame");
  const picture = el("img");
  picture.alt = `frame at video time ${videoTime(alert.video_time)}, stream ${alert.stream}`;
  picture.loading = "lazy";
  let tries = 0;
  picture.addEventListener("error", () => {
    // The detector may write the picture a moment after the alert: try again a few times, then say so.
    tries += 1;
    if (tries <= 3) {
      setTimeout(() => { picture.src = `/frames/${alert.id}?try=${tries}`; }, 1500 * tries);
    } else {
      figure.replaceChildren(el("figcaption", "no-frame", "no picture saved for this alert"));
    }
  });
  picture.src = `/frames/${alert.id}`;
  figure.append(picture);
  return figure;
}

function addAlert(alert, live) {
  if (!state.shownAt.has(alert.id)) state.shownAt.set(alert.id, Date.now() / 1000);
  const feed = document.getElementById("alert-feed");
  const existing = feed.querySelector(`li[data-id="${alert.id}"]`);
  state.alerts.set(alert.id, alert);
  const card = alertCard(alert);
  if (existing) replaceCard(existing, card);
  else feed.prepend(card);
  while (state.alerts.size > state.maxAlerts) {
    const oldest = Math.min(...state.alerts.keys());
    state.alerts.delete(oldest);
    const gone = feed.querySelector(`li[data-id="${oldest}"]`);
    if (gone) gone.remove();
  }
  if (state.shownAt.size > 4 * state.maxAlerts) {
    for (const id of state.shownAt.keys()) if (!state.alerts.has(id)) state.shownAt.delete(id);
  }
  if (live) {
    if (!existing) watchUnseen(alert, card);
    markGraph();
    showCounts();
  }
}

// -- a new alert out of sight -------------------------------------------------------------------------------------
// A new alert goes on top of the feed: with the page scrolled down to the tiles (a phone, one column: 256 tiles make
// it 60,000 px tall) or the feed scrolled to older alerts, it came where nobody looked, and only a count changed in a
// header that a phone had scrolled away too. Until the newest alert is seen, a notice stays in sight and shows it.
const unseen = {count: 0, alert: null};
const sight = new IntersectionObserver((entries) => {
  for (const entry of entries) {
    if (!entry.target.isConnected || !unseen.alert || entry.target.dataset.id !== String(unseen.alert.id)) continue;
    // Half of it in sight, or a third of the window (a card with its picture may be taller than the window).
    if (entry.intersectionRatio >= 0.5 || entry.intersectionRect.height >= innerHeight / 3) clearUnseen();
    else showUnseen();
  }
}, {threshold: [0, 0.25, 0.5, 0.75, 1]});

function watchUnseen(alert, card) {
  unseen.count += 1;
  unseen.alert = alert;
  sight.disconnect();
  sight.observe(card); // its first report says whether the card came in sight
}

function showUnseen() {
  const notice = document.getElementById("new-alert");
  const {step_name: step, stream} = unseen.alert;
  notice.textContent = unseen.count > 1
    ? `\u26a0 ${unseen.count} new alerts out of sight, the newest ${step} on stream ${stream}: show it`
    : `\u26a0 New alert out of sight: ${step} on stream ${stream}: show it`;
  notice.hidden = false;
}

function clearUnseen() {
  unseen.count = 0;
  unseen.alert = null;
  sight.disconnect();
  document.getElementById("new-alert").hidden = true;
}

function showNewest() {
  const card = unseen.alert && document.querySelector(`#alert-feed li[data-id="${unseen.alert.id}"]`);
  clearUnseen();
  if (!card) return; // pushed out of the kept alerts meanwhile
  document.getElementById("alert-feed").scrollTop = 0;
  card.scrollIntoView({block: "center"});
  card.focus({preventScroll: true}); // Tab goes on to its Acknowledge button
}

// A later copy of an alert (the early alert confirmed, a re-send) redraws its card: an acknowledgement the user has
// just sent stays pending on the new card (it said "Acknowledge" again until the checker's answer came), the picture
// already shown of the same video time is kept (not fetched and drawn again), and keyboard focus stays where it was:
// on the card, or on its Acknowledge button (moved to the card, the user's next Enter (un)selected the alert instead of
// acknowledging it).
function replaceCard(existing, card) {
  const pending = existing.querySelector("button.ack:disabled");
  const button = card.querySelector("button.ack");
  if (pending && button) {
    button.disabled = true;
    button.textContent = pending.textContent;
  }
  const shown = existing.querySelector("figure.frame img");
  const fresh = card.querySelector("figure.frame");
  const sameTime = existing.dataset.videoTime === card.dataset.videoTime;
  if (shown && shown.complete && shown.naturalWidth > 0 && fresh && sameTime) {
    fresh.replaceWith(shown.parentNode);
  }
  const focused = existing.contains(document.activeElement);
  const onButton = focused && document.activeElement.matches("button.ack");
  existing.replaceWith(card);
  if (unseen.alert && card.dataset.id === String(unseen.alert.id)) sight.observe(card); // the old card is gone
  if (focused) (onButton && button && !button.disabled ? button : card).focus();
}

function updateAlert(alert) {
  if (!state.alerts.has(alert.id)) return;
  state.alerts.set(alert.id, alert);
  const existing = document.querySelector(`#alert-feed li[data-id="${alert.id}"]`);
  if (existing) replaceCard(existing, alertCard(alert));
  for (const tile of [...state.tiles.values()]) {
    if (tile.last_alert && tile.last_alert.id === alert.id) {
      tile.last_alert = alert;
      updateTile(tile);
    }
  }
  markGraph();
  showCounts();
}

function select(id) {
  state.selected = state.selected === id ? null : id;
  document.querySelectorAll("#alert-feed li.selected").forEach((node) => node.classList.remove("selected"));
  if (state.selected !== null) {
    const card = document.querySelector(`#alert-feed li[data-id="${id}"]`);
    if (card) card.classList.add("selected");
  }
  markGraph();
}

// -- tiles --------------------------------------------------------------------------------------------------------
// silent: the checker stopped re-sending the stream's status (a restarted checker forgets a stream whose detector
// went away); unknown: the checker itself is not answering. Neither is counted as live.
const STATE_LABELS = {live: "\u25b6 LIVE", lost: "\u26a0 LOST", ended: "\u25a0 ENDED", silent: "? NO WORD",
                      unknown: "? UNKNOWN"};

// The state a tile shows: the server's, unless this page has lost the dashboard, when nothing is known of a stream
// that had not ended.
function tileState(tile) {
  return state.pageLive || tile.state === "ended" ? tile.state : "unknown";
}

function stateLabel(tile) {
  const shown = tileState(tile);
  // A camera stopped by hand is not a recording played to its end: "ENDED" told a watcher nothing of which.
  if (shown === "ended" && tile.stopped) return "\u25a0 STOPPED";
  const label = STATE_LABELS[shown] || shown;
  if (shown === "silent") return `${label} since ${clock(tile.heard)}`;
  if (shown === "lost") return `${label} since ${clock(tile.since)}`;
  return label;
}

const LATENCIES = [["decode_ms", "decode"], ["features_ms", "features"], ["detector_ms", "detector"],
                   ["segmenter_ms", "segmenter"], ["hop_ms", "hop"], ["alert_out_ms", "alert out"]];

function updateTile(tile) {
  state.tiles.set(tile.stream, tile);
  const box = document.getElementById("tiles");
  const shown = tileState(tile);
  const card = el("article", `tile state-${shown}`);
  card.dataset.stream = tile.stream;
  const head = el("header", "tile-head");
  head.append(el("h3", null, tile.stream), el("span", "state", stateLabel(tile)));
  card.append(head);

  const live = shown === "live";
  const facts = el("dl", "facts");
  const fact = (name, value) => facts.append(el("dt", null, name), el("dd", null, value));
  // Only a live stream has a step being done now: what a lost or silent one said last is old news.
  fact("now", live ? (tile.current ?? "(background)") : "-");
  if (shown === "unknown") {
    const why = state.pageLive ? "the checker is not answering" : "this page has lost the dashboard";
    fact("last heard", `${clock(tile.heard)} (${why})`);
  } else if (shown === "silent") fact("last heard", clock(tile.heard));
  fact("done", tile.last_done ? `${tile.done} step(s), last ${tile.last_done}` : "nothing yet");
  card.append(facts);

  const next = el("div", "next");
  const title = live || shown === "ended" ? "allowed next:" : "allowed next, as last heard:";
  next.append(el("span", "next-title", title));
  // Every step left waiting on the one under way is not "none": nothing could follow, it would read.
  if (tile.allowed.length === 0) next.append(el("span", "muted", tile.after ? ` after ${tile.after}` : " none"));
  const list = el("ol", "next-list");
  // A step the rule gives no probability (the binary rule scores only the successors of the step done last) is
  // named without a number, as in the terminal view: "0%" read as "it cannot come next", yet it is allowed.
  tile.allowed.forEach((step) => list.append(
    el("li", null, step.probability > 0 ? `${step.name} ${chance(step.probability)}` : step.name)));
  if (tile.allowed_more) list.append(el("li", "muted", `and ${tile.allowed_more} more`));
  next.append(list);
  card.append(next);

  const last = el("p", "last-alert");
  if (tile.last_alert) {
    const a = tile.last_alert;
    const [, label] = alertLabel(a);
    const missing = a.missing_names.length ? `, missing ${a.missing_names.join(", ")}` : "";
    last.textContent = `last alert: ${label} ${a.step_name}${missing} (${percent(a.probability)})`;
    last.classList.add(a.acked_at === null && !a.retracted ? "open" : "closed");
  } else {
    last.textContent = `alerts: ${tile.alerts}`;
  }
  card.append(last);
  const over = tile.stopped ? "session stopped" : "session ended";
  if (tile.never_done && tile.never_done.length) {
    const undone = tile.stopped ? "not done by the stop" : "never done";
    card.append(el("p", "never", `${over}; ${undone}: ${tile.never_done.join(", ")}`));
  }
  if (tile.no_verdict) card.append(el("p", "never", `${over}: ${tile.no_verdict}`));

  const latency = el("p", "latency");
  latency.textContent = "ms: " + LATENCIES.map(([key, name]) => `${name} ${Math.round(tile.latency_ms[key])}`)
    .join(" \u00b7 ");
  card.append(latency);
  const fps = tile.fps === null || !(live || shown === "ended") ? "-" : tile.fps.toFixed(1);
  card.append(el("p", "rates", `${fps} fps \u00b7 ${tile.frames} frames \u00b7 ` +
                               `${tile.dropped} dropped \u00b7 ${tile.gaps} gaps`));

  card.dataset.rank = String(tileRank(tile));
  const existing = box.querySelector(`article[data-stream="${CSS.escape(tile.stream)}"]`);
  if (existing && existing.dataset.rank === card.dataset.rank) {
    existing.replaceWith(card);
  } else {
    if (existing) existing.remove();
    const after = [...box.children].find((node) => tileBefore(card, node));
    box.insertBefore(card, after || null);
  }
  showCounts();
}

// The groups tiles are listed in, as the terminal view lists its rows (streaming/view/render.py, stream_order):
// the live streams with an alert, the other live ones, then the lost, the ended (or stopped) and those nothing is
// known of now. In name order only, a flood of made-up stream ids (or a few dozen cameras) put the one stream with an
// alert below hundreds of tiles, lost ones among them. By name within a group, a tile moves only when its stream's
// standing changes.
const TILE_GROUPS = ["live", "lost", "ended"];

function tileRank(tile) {
  const shown = tileState(tile);
  if (shown === "live" && (tile.alerts > 0 || tile.last_alert)) return 0;
  const group = TILE_GROUPS.indexOf(shown);
  return group < 0 ? 1 + TILE_GROUPS.length : 1 + group;
}

function tileBefore(card, node) {
  const [rank, other] = [Number(card.dataset.rank), Number(node.dataset.rank)];
  return rank < other || (rank === other && card.dataset.stream < node.dataset.stream);
}

// A page left open for days would otherwise keep every tile it was ever sent.
function removeTile(stream) {
  state.tiles.delete(stream);
  const card = document.getElementById("tiles").querySelector(`article[data-stream="${CSS.escape(stream)}"]`);
  if (card) card.remove();
  showCounts();
}

// -- finished sessions --------------------------------------------------------------------------------------------
// A stream's tile goes some 11 minutes after its session ended (10 after the checker let it go): its end report
// stays here, so that a supervisor who looks later still learns of a step never done.
function sessionKey(session) {
  return JSON.stringify([session.stream, session.run]);
}

function addFinished(session) {
  const key = sessionKey(session);
  const list = document.getElementById("finished-list");
  const existing = [...list.children].find((node) => node.dataset.key === key);
  state.finished.set(key, session);
  const never = session.never_done && session.never_done.length;
  const item = el("li", `session ${never ? "never" : "done"}`);
  item.dataset.key = key;
  item.dataset.stream = session.stream;
  const head = el("div", "session-head");
  // Heard only late (this dashboard started later, or the checker, its link or the detector's was down): it ended
  // then or before.
  const over = session.stopped ? "stopped" : "ended"; // as its tile said: a camera stopped by hand, or played out
  const when = `${over} ${clock(session.ended)}${session.seen_end ? "" : " or before (re-sent)"}`;
  head.append(el("strong", null, `\u25a0 ${session.stream}`), " ", el("span", "when", when));
  item.append(head);
  const counts = [];
  if (session.done !== null) {
    counts.push(session.last_done ? `${session.done} step(s) done, last ${session.last_done}` : "no step done");
  }
  if (session.alerts !== null) counts.push(`${session.alerts} alert(s)`);
  if (counts.length) item.append(el("p", "counts", counts.join(" \u00b7 ")));
  let verdict;
  if (session.no_verdict) verdict = `? ${session.no_verdict}`;
  else if (never) {
    verdict = `\u2717 ${session.stopped ? "not done by the stop" : "never done"}: ${session.never_done.join(", ")}`;
  }
  else verdict = "\u2713 nothing missing"; // the checker reports only a session that left a required step undone
  item.append(el("p", "verdict", verdict));
  if (existing) existing.replaceWith(item);
  else list.prepend(item);
  for (const oldest of state.finished.keys()) {
    if (state.finished.size <= state.maxFinished) break;
    state.finished.delete(oldest);
    const gone = [...list.children].find((node) => node.dataset.key === oldest);
    if (gone) gone.remove();
  }
  document.getElementById("no-finished").hidden = state.finished.size > 0;
  // Pointed at from the empty tiles only when there is something to see there.
  document.getElementById("see-finished").hidden = state.finished.size === 0;
}

// -- the task graph -----------------------------------------------------------------------------------------------
async function drawGraph() {
  const view = document.getElementById("graph-view");
  const graph = state.graph;
  if (!graph || (!graph.svg && graph.steps.length === 0)) {
    view.replaceChildren(el("p", "empty", "No task graph given (stream-detect dashboard --graph FILE)."));
    state.graphDrawn = true;
    return;
  }
  state.graphDrawn = true;
  if (graph.svg) {
    try {
      const response = await fetch("/graph.svg", {credentials: "same-origin"});
      if (!response.ok) throw new Error(String(response.status));
      const parsed = new DOMParser().parseFromString(await response.text(), "image/svg+xml");
      const root = parsed.documentElement;
      if (root.nodeName !== "svg") throw new Error("not an SVG");
      root.removeAttribute("width");
      root.removeAttribute("height");
      view.replaceChildren(document.importNode(root, true));
      markGraph();
      return;
    } catch (err) {
      // Fall back on the list below.
    }
  }
  const list = el("ul", "step-list");
  graph.steps.forEach((step) => {
    const item = el("li", null, step.name);
    item.dataset.step = String(step.step);
    const needs = step.requires.map(stepName).join(", ");
    item.append(el("span", "requires", needs ? ` \u2190 needs ${needs}` : " \u2190 needs nothing"));
    list.append(item);
  });
  view.replaceChildren(list);
  markGraph();
}

function markedAlert() {
  if (state.selected !== null && state.alerts.has(state.selected)) return state.alerts.get(state.selected);
  // The selected alert is no longer kept (newer ones pushed it out): the newest is marked, and said to be.
  state.selected = null;
  let newest = null;
  for (const alert of state.alerts.values()) if (!newest || alert.id > newest.id) newest = alert;
  return newest;
}

const SVG_NS = "http://www.w3.org/2000/svg";
const TAG_GAP = 4; // between a box and its word, in the drawing's units

function overlaps(a, b) {
  return a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
}

// A word beside a marked box, so the mark does not rest on colour or line style alone. Beside, not above: the
// arrows come in from above and leave below. The side taken is the first whose word covers no other box and no
// arrowhead; the drawing then grows to hold it (fitTags).
function tagBeside(view, node, tag) {
  const box = node.getBBox();
  const word = document.createElementNS(SVG_NS, "text");
  word.setAttribute("class", "hl-tag");
  word.setAttribute("y", String(box.y + box.height / 2));
  word.setAttribute("dominant-baseline", "middle");
  word.textContent = tag;
  node.append(word);
  const obstacles = [...view.querySelectorAll("g.node, g.edge polygon")]
    .filter((other) => other !== node)
    .map((other) => other.getBBox());
  const sides = [["start", box.x + box.width + TAG_GAP], ["end", box.x - TAG_GAP]];
  for (const [anchor, x] of sides) {
    word.setAttribute("text-anchor", anchor);
    word.setAttribute("x", String(x));
    const at = word.getBBox();
    if (!obstacles.some((other) => overlaps(at, other))) return;
  }
  word.setAttribute("text-anchor", "start"); // both sides taken: the right, over whatever is there
  word.setAttribute("x", String(box.x + box.width + TAG_GAP));
}

// The drawing's viewBox, widened to hold every word (a word beside the outermost box would be cut off).
function fitTags(view) {
  const svg = view.querySelector("svg");
  if (!svg) return;
  if (!svg.dataset.viewBox) svg.dataset.viewBox = svg.getAttribute("viewBox") || "";
  const [x0, y0, w0, h0] = svg.dataset.viewBox.split(/[\s,]+/).map(Number);
  if (![x0, y0, w0, h0].every(Number.isFinite)) return;
  let left = x0;
  let right = x0 + w0;
  svg.querySelectorAll("text.hl-tag").forEach((word) => {
    const box = word.getBBox();
    const m = toDrawing(svg, word);
    left = Math.min(left, new DOMPoint(box.x, box.y).matrixTransform(m).x - TAG_GAP);
    right = Math.max(right, new DOMPoint(box.x + box.width, box.y).matrixTransform(m).x + TAG_GAP);
  });
  svg.setAttribute("viewBox", `${left} ${y0} ${right - left} ${h0}`);
}

// From an element's own units to the drawing's (Graphviz shifts its whole graph with one group's transform).
function toDrawing(svg, element) {
  let m = new DOMMatrix();
  for (let e = element.parentNode; e && e !== svg; e = e.parentNode) {
    const list = e.transform && e.transform.baseVal;
    if (list && list.numberOfItems) m = DOMMatrix.fromMatrix(list.consolidate().matrix).multiply(m);
  }
  return m;
}

function markGraph() {
  const view = document.getElementById("graph-view");
  view.querySelectorAll(".hl-alert, .hl-missing, .hl-edge").forEach((node) => {
    node.classList.remove("hl-alert", "hl-missing", "hl-edge");
  });
  view.querySelectorAll("text.hl-tag").forEach((node) => node.remove());
  fitTags(view); // back to the drawing's own size until words are placed again
  const alert = markedAlert();
  const caption = document.getElementById("graph-caption");
  if (state.conflicts.length) {
    // Its step ids are the checker's, its names another graph's: a mark would point at the wrong step.
    caption.textContent = "Not marked: this graph names the checker's steps otherwise (see the warning above).";
    return;
  }
  if (!alert) {
    caption.textContent = "Select an alert to mark its step and missing pre-conditions.";
    return;
  }
  const missing = new Set(alert.missing.map(String));
  const mark = (step, cls, tag) => {
    view.querySelectorAll(`[data-step="${step}"]`).forEach((node) => {
      node.classList.add(cls);
      if (node.namespaceURI === SVG_NS) tagBeside(view, node, tag);
    });
  };
  mark(String(alert.step), "hl-alert", "\u26a0 ALERT");
  missing.forEach((step) => mark(step, "hl-missing", "\u2717 MISSING"));
  fitTags(view);
  view.querySelectorAll("g.edge").forEach((edge) => {
    if (edge.dataset.to === String(alert.step) && missing.has(edge.dataset.from)) edge.classList.add("hl-edge");
  });
  const names = alert.missing_names.join(", ") || "none";
  const which = state.selected === null ? "newest alert" : "selected alert";
  caption.textContent = `Marked (${which}): \u26a0 ${alert.step_name} on stream ${alert.stream}; ` +
                        `\u2717 missing: ${names}.`;
}

document.getElementById("new-alert").addEventListener("click", showNewest);
connect();
setInterval(() => { watchSilence(); watchDay(); }, 1000);
