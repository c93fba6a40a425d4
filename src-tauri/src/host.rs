//! Whether this desktop can show a tray icon at all. On Linux the icon needs a tray host: a
//! StatusNotifier watcher on the session bus (KDE, GNOME with the AppIndicator extension,
//! waybar…) or an XEmbed system tray (`_NET_SYSTEM_TRAY_S<screen>` owned: trayer, xfce4-panel…).
//! Without one the app would run invisibly, so `shell` opens the window instead and says so.

/// Whether a tray host is there now.
#[cfg(target_os = "linux")]
pub fn tray_host() -> bool {
    sni_watcher() || xembed_tray()
}

/// Elsewhere the system always has a tray (macOS menu bar, Windows notification area).
#[cfg(not(target_os = "linux"))]
pub fn tray_host() -> bool {
    true
}

#[cfg(target_os = "linux")]
fn sni_watcher() -> bool {
    let Ok(bus) = zbus::blocking::Connection::session() else {
        return false;
    };
    let Ok(dbus) = zbus::blocking::fdo::DBusProxy::new(&bus) else {
        return false;
    };
    zbus::names::BusName::try_from("org.kde.StatusNotifierWatcher")
        .ok()
        .and_then(|name| dbus.name_has_owner(name).ok())
        .unwrap_or(false)
}

#[cfg(target_os = "linux")]
fn xembed_tray() -> bool {
    use x11rb::connection::Connection as _;
    use x11rb::protocol::xproto::ConnectionExt as _;
    let Ok((conn, screen)) = x11rb::connect(None) else {
        return false;
    };
    let name = format!("_NET_SYSTEM_TRAY_S{screen}");
    let owner = conn
        .intern_atom(false, name.as_bytes())
        .ok()
        .and_then(|c| c.reply().ok())
        .and_then(|atom| conn.get_selection_owner(atom.atom).ok())
        .and_then(|c| c.reply().ok())
        .map(|r| r.owner);
    let _ = conn.flush();
    owner.is_some_and(|o| o != x11rb::NONE)
}
