//! The live configuration as routing reads it — the config file's routes and `modelMap`
//! overlaid on the UI's — and the edits the tray and the admin API share: toggle, move a
//! provider first, clear cooldowns. Each edit is stored, then applied by `Core::reload`. Also the
//! language setting as routing reads it (`Core::locale`).

use std::collections::BTreeMap;

use super::Core;
use crate::config::RouteConfig;

/// The setting that holds the named routes made in the UI.
pub const UI_ROUTES: &str = "routes";
/// The setting that holds the `modelMap` entries made in the UI.
pub const UI_MODEL_MAP: &str = "modelMap";

impl Core {
    /// The language and clock the tray, the notifications and the failover lines speak now.
    pub fn locale(&self) -> crate::i18n::Locale {
        self.routing.locale.get()
    }

    /// Reads the language chosen in Settings into the routing context (at start, on a change).
    pub fn apply_language(&self) {
        let choice = self.language_choice();
        self.routing
            .locale
            .set(crate::i18n::Locale::with_choice(&choice));
    }

    /// The language chosen in Settings: `"auto"` (the system's) or a language's tag.
    pub fn language_choice(&self) -> String {
        crate::i18n::choice_from(self.store.setting(crate::i18n::SETTING).ok().flatten())
    }

    /// Named routes made in the UI (the `routes` setting), without the config file's.
    pub fn ui_routes(&self) -> BTreeMap<String, RouteConfig> {
        self.store
            .setting(UI_ROUTES)
            .ok()
            .flatten()
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default()
    }

    /// `modelMap` entries made in the UI (the `modelMap` setting), without the config file's.
    pub fn ui_model_map(&self) -> BTreeMap<String, String> {
        self.store
            .setting(UI_MODEL_MAP)
            .ok()
            .flatten()
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default()
    }

    /// The named routes routing uses: the UI's, overlaid by the config file's (the file wins
    /// for the names it defines, as it does for its providers).
    pub fn live_routes(&self) -> BTreeMap<String, RouteConfig> {
        self.routes_over(self.ui_routes())
    }

    /// `ui` routes (as stored now, or as an edit would leave them) overlaid by the config
    /// file's: what routing would use.
    pub fn routes_over(&self, ui: BTreeMap<String, RouteConfig>) -> BTreeMap<String, RouteConfig> {
        let mut r = ui;
        r.extend(self.file_config.routes.clone());
        r
    }

    /// The `modelMap` routing uses: the UI's entries overlaid by the config file's.
    pub fn live_model_map(&self) -> BTreeMap<String, String> {
        self.map_over(self.ui_model_map())
    }

    /// `ui` mappings (as stored now, or as an edit would leave them) overlaid by the config
    /// file's.
    pub fn map_over(&self, ui: BTreeMap<String, String>) -> BTreeMap<String, String> {
        let mut m = ui;
        m.extend(self.file_config.model_map.clone());
        m
    }

    /// Turns a provider on or off (kept across restarts) and applies it: what the UI's switch
    /// and the tray's menu do.
    pub fn set_enabled(&self, id: &str, enabled: bool) -> Result<(), crate::store::EditError> {
        self.store.set_enabled(id, enabled)?;
        tracing::info!(provider = %id, enabled, "provider toggled");
        Ok(self.reload()?)
    }

    /// Puts a provider first in the order `auto` follows, the others keeping theirs.
    pub fn move_first(&self, id: &str) -> Result<(), crate::store::EditError> {
        let mut stored: Vec<crate::config::ProviderConfig> = self
            .store
            .load_providers()?
            .iter()
            .map(|s| s.effective())
            .collect();
        stored.sort_by(|a, b| (a.priority, &a.id).cmp(&(b.priority, &b.id)));
        if !stored.iter().any(|p| p.id == id) {
            return Err(crate::store::EditError::NotFound(id.to_string()));
        }
        let mut ids: Vec<String> = vec![id.to_string()];
        ids.extend(stored.into_iter().map(|p| p.id).filter(|p| p != id));
        self.store.set_order(&ids, self.routing.clock.now_ms())?;
        tracing::info!(provider = %id, "provider moved to the top");
        Ok(self.reload()?)
    }

    /// Lifts a provider's cooldowns (those of one key or model when given) and, unless only a
    /// key's, closes its breakers. Returns how many cooldowns were lifted.
    pub fn clear_cooldowns(&self, provider: &str, key: Option<&str>, model: Option<&str>) -> usize {
        let mut cleared = 0;
        for c in self.routing.cooldowns.active() {
            let matches = c.scope.provider == provider
                && key.is_none_or(|k| c.scope.key.as_deref() == Some(k))
                && model.is_none_or(|m| c.scope.model.as_deref() == Some(m));
            if matches && self.routing.cooldowns.clear(&c.scope) {
                cleared += 1;
            }
        }
        if key.is_none() {
            if let Some(p) = self.routing.snapshot.load().provider(provider) {
                p.runtime.breakers.reset(model);
            }
        }
        cleared
    }

    /// The web search settings, with the key they name looked up.
    pub fn web_search_service(&self) -> crate::search::Service {
        // The config file's, when it gives one; else Settings'.
        let settings: crate::search::SearchSettings = match &self.file_config.web_search {
            Some(s) => s.clone(),
            None => self.stored_web_search(),
        };
        let key = Some(settings.api_key_env.trim())
            .filter(|n| !n.is_empty())
            .and_then(|n| self.secret(n))
            .filter(|k| !k.is_empty());
        crate::search::Service::new(settings, key)
    }

    /// The web search settings Settings saved (the settings table's), whatever the file says.
    pub fn stored_web_search(&self) -> crate::search::SearchSettings {
        self.store
            .setting(crate::search::SETTING)
            .ok()
            .flatten()
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default()
    }
}
