//! What the desktop shell lends the core: the hooks behind the UI's desktop settings.

/// Hooks the desktop shell registers so the web UI can reach what only the shell can do.
pub struct DesktopLink {
    pub autostart: Box<dyn Fn() -> bool + Send + Sync>,
    pub set_autostart: Box<dyn Fn(bool) -> Result<(), String> + Send + Sync>,
    /// Restarts the gateway (config file and listen address read again).
    pub restart: Box<dyn Fn() + Send + Sync>,
    /// Quits and starts the app's binary again (after an update replaced it).
    pub relaunch: Box<dyn Fn() + Send + Sync>,
}
