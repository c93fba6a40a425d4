// The desktop app sets the port that was asked for (and one to try) before this page loads.
for (const [cls, value] of [["port", window.BATON_PORT], ["other", window.BATON_OTHER_PORT]]) {
  if (value) for (const n of document.querySelectorAll(`.${cls}`)) n.textContent = String(value);
}
