// Live updates of the events page: rows arrive as server-sent events from
// /events/stream (the master's Watch) and are put on top of the table.
// Without JavaScript the page still shows the events up to its load.
"use strict";
(function () {
  const live = document.querySelector(".live[data-stream]");
  const body = document.getElementById("events-body");
  if (!live || !body || !window.EventSource) return;
  const toggle = document.getElementById("live-toggle");
  const status = document.getElementById("live-status");
  const maxRows = 500;
  let base = live.dataset.stream;
  let last = 0;
  let source = null;
  let received = 0;

  function cell(tr, text, cls) {
    const td = document.createElement("td");
    if (cls) td.className = cls;
    td.textContent = text;
    tr.appendChild(td);
    return td;
  }

  function add(e) {
    const ev = JSON.parse(e.data);
    last = ev.position;
    const tr = document.createElement("tr");
    tr.className = "fresh";
    cell(tr, String(ev.position), "num");
    cell(tr, ev.time, "t");
    cell(tr, ev.type);
    const td = cell(tr, "");
    if (ev.href) {
      const a = document.createElement("a");
      a.href = ev.href;
      a.textContent = ev.stream;
      td.appendChild(a);
    } else {
      td.textContent = ev.stream;
    }
    cell(tr, ev.actor);
    cell(tr, ev.summary);
    body.insertBefore(tr, body.firstChild);
    while (body.rows.length > maxRows) body.deleteRow(body.rows.length - 1);
    const empty = document.getElementById("events-empty");
    if (empty) empty.remove();
    received++;
    status.textContent = "Live: " + received + " new event" + (received === 1 ? "" : "s") + " since the page loaded.";
  }

  function start() {
    let url = base;
    if (last > 0) url = url.replace(/([?&])from=\d+/, "$1from=" + (last + 1));
    source = new EventSource(url);
    source.onmessage = add;
    source.addEventListener("failure", function (e) {
      status.textContent = "Live updates stopped: " + JSON.parse(e.data);
      stop();
    });
    source.onopen = function () {
      if (received === 0) status.textContent = "Live: connected, waiting for the next event.";
    };
    source.onerror = function () {
      status.textContent = "Live updates interrupted; reconnecting…";
    };
    toggle.textContent = "Pause live updates";
  }

  function stop() {
    if (source) source.close();
    source = null;
    toggle.textContent = "Resume live updates";
  }

  toggle.hidden = false;
  toggle.addEventListener("click", function () {
    if (source) {
      stop();
      status.textContent = "Paused.";
    } else {
      start();
    }
  });
  start();
})();
