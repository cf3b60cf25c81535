// Follows a task's logs: each <pre data-follow="URL"> opens scrolled to
// its newest line and gets what the task writes from now on, appended
// under the tail the page was served with. Without JavaScript the page
// shows the tail alone.
(function () {
  "use strict";
  // A log box opens at its newest line, as a terminal's tail does: the
  // tail served with the page ends with what the task wrote last.
  document.querySelectorAll("pre.log").forEach(function (pre) {
    pre.scrollTop = pre.scrollHeight;
  });
  if (!window.EventSource) return;
  const maxChars = 1 << 20; // keep the page's logs bounded
  document.querySelectorAll("pre[data-follow]").forEach(function (pre) {
    const source = new EventSource(pre.dataset.follow);
    source.onmessage = function (e) {
      const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
      pre.textContent += JSON.parse(e.data);
      if (pre.textContent.length > maxChars) {
        pre.textContent = pre.textContent.slice(-maxChars);
      }
      if (atEnd) pre.scrollTop = pre.scrollHeight;
    };
    source.addEventListener("failure", function () {
      source.close();
    });
  });
})();
