// The SQL console's schema panel: a click on a table's or column's name
// puts it into the query at the cursor. The panel and the console work
// without this script.
(() => {
  const q = document.getElementById('q');
  const panel = document.getElementById('schema');
  if (!q || !panel) return;
  panel.addEventListener('click', (ev) => {
    const b = ev.target.closest('button[data-insert]');
    if (!b) return;
    ev.preventDefault();
    const text = b.dataset.insert;
    const start = q.selectionStart ?? q.value.length;
    const end = q.selectionEnd ?? start;
    q.value = q.value.slice(0, start) + text + q.value.slice(end);
    q.focus();
    q.selectionStart = q.selectionEnd = start + text.length;
  });
})();
