// The page the desktop window shows when the gateway could not start (its port is taken). It
// speaks the user's language like the rest of the UI: the desktop app says which (BATON_LANG).
import { loadLanguage, t, translateStatic } from "./i18n.js";

await loadLanguage(window.BATON_LANG || "auto");
translateStatic();
document.title = t("Baton could not start");
// The desktop app sets the port that was asked for (and one to try) before this page loads.
for (const [cls, value] of [["port", window.BATON_PORT], ["other", window.BATON_OTHER_PORT]]) {
  if (value) for (const n of document.querySelectorAll(`.${cls}`)) n.textContent = String(value);
}
