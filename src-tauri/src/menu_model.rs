//! The tray menu as data: what each item says, whether it can be chosen, whether it is ticked.
//! A new state whose items are the same items (same ids, same places) is written into the menu
//! that is there, item by item, so a menu the user has open stays open while a cooldown ends or
//! a provider's state line changes; only a different set of items builds a new menu (replacing
//! the menu closes it, and a click that lands as it is replaced opens nothing).

use tauri::menu::{
    CheckMenuItem, IsMenuItem, Menu, MenuItem, MenuItemKind, PredefinedMenuItem, Submenu,
};
use tauri::AppHandle;

type Wry = tauri::Wry;

/// One item of the menu.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub id: String,
    pub text: String,
    pub enabled: bool,
    pub kind: Kind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    Item,
    Check(bool),
    Sub(Vec<Entry>),
    Separator,
}

impl Entry {
    pub fn item(id: impl Into<String>, text: impl Into<String>, enabled: bool) -> Entry {
        Entry {
            id: id.into(),
            text: text.into(),
            enabled,
            kind: Kind::Item,
        }
    }

    pub fn check(id: impl Into<String>, text: impl Into<String>, enabled: bool, on: bool) -> Entry {
        Entry {
            kind: Kind::Check(on),
            ..Entry::item(id, text, enabled)
        }
    }

    pub fn sub(id: impl Into<String>, text: impl Into<String>, items: Vec<Entry>) -> Entry {
        Entry {
            kind: Kind::Sub(items),
            ..Entry::item(id, text, true)
        }
    }

    pub fn separator() -> Entry {
        Entry {
            kind: Kind::Separator,
            ..Entry::item("", "", true)
        }
    }
}

/// Whether `a` and `b` are the same items in the same places (what they say aside).
pub fn same_items(a: &[Entry], b: &[Entry]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(a, b)| {
            a.id == b.id
                && match (&a.kind, &b.kind) {
                    (Kind::Sub(x), Kind::Sub(y)) => same_items(x, y),
                    (Kind::Check(_), Kind::Check(_)) => true,
                    (x, y) => x == y,
                }
        })
}

/// A new menu of `entries`.
pub fn build(app: &AppHandle, entries: &[Entry]) -> tauri::Result<Menu<Wry>> {
    let menu = Menu::new(app)?;
    for e in entries {
        menu.append(made(app, e)?.item())?;
    }
    Ok(menu)
}

enum Made {
    Item(MenuItem<Wry>),
    Check(CheckMenuItem<Wry>),
    Sub(Submenu<Wry>),
    Separator(PredefinedMenuItem<Wry>),
}

impl Made {
    fn item(&self) -> &dyn IsMenuItem<Wry> {
        match self {
            Made::Item(i) => i,
            Made::Check(i) => i,
            Made::Sub(i) => i,
            Made::Separator(i) => i,
        }
    }
}

fn made(app: &AppHandle, e: &Entry) -> tauri::Result<Made> {
    let (id, text) = (e.id.as_str(), e.text.as_str());
    Ok(match &e.kind {
        Kind::Item => Made::Item(MenuItem::with_id(app, id, text, e.enabled, None::<&str>)?),
        Kind::Check(on) => Made::Check(CheckMenuItem::with_id(
            app,
            id,
            text,
            e.enabled,
            *on,
            None::<&str>,
        )?),
        Kind::Sub(items) => {
            let sub = Submenu::with_id(app, id, text, e.enabled)?;
            for i in items {
                sub.append(made(app, i)?.item())?;
            }
            Made::Sub(sub)
        }
        Kind::Separator => Made::Separator(PredefinedMenuItem::separator(app)?),
    })
}

/// Writes what changed from `old` to `new` (the same items: [`same_items`]) into `items`, the
/// menu's items as built from `old`. False when the menu is not what `old` says (or an item
/// would not take the change): the caller builds a new one.
pub fn update(items: Vec<MenuItemKind<Wry>>, old: &[Entry], new: &[Entry]) -> bool {
    write(items, old, new).is_some()
}

fn write(items: Vec<MenuItemKind<Wry>>, old: &[Entry], new: &[Entry]) -> Option<()> {
    if items.len() != new.len() || old.len() != new.len() {
        return None;
    }
    for ((item, old), new) in items.into_iter().zip(old).zip(new) {
        if old == new {
            continue;
        }
        let text = (old.text != new.text).then_some(new.text.as_str());
        let enabled = (old.enabled != new.enabled).then_some(new.enabled);
        match (item, &old.kind, &new.kind) {
            (MenuItemKind::MenuItem(i), Kind::Item, Kind::Item) => {
                text.map_or(Ok(()), |t| i.set_text(t)).ok()?;
                enabled.map_or(Ok(()), |e| i.set_enabled(e)).ok()?;
            }
            (MenuItemKind::Check(i), Kind::Check(was), Kind::Check(on)) => {
                text.map_or(Ok(()), |t| i.set_text(t)).ok()?;
                enabled.map_or(Ok(()), |e| i.set_enabled(e)).ok()?;
                if was != on {
                    i.set_checked(*on).ok()?;
                }
            }
            (MenuItemKind::Submenu(s), Kind::Sub(before), Kind::Sub(after)) => {
                text.map_or(Ok(()), |t| s.set_text(t)).ok()?;
                enabled.map_or(Ok(()), |e| s.set_enabled(e)).ok()?;
                write(s.items().ok()?, before, after)?;
            }
            (MenuItemKind::Predefined(_), Kind::Separator, Kind::Separator) => {}
            _ => return None,
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn menu(cooling: bool, providers: &[&str]) -> Vec<Entry> {
        let subs = providers
            .iter()
            .map(|p| {
                Entry::sub(
                    format!("prov:menu:{p}"),
                    format!("{p} — {}", if cooling { "cooling" } else { "ready" }),
                    vec![
                        Entry::check(format!("prov:toggle:{p}"), "Enabled", true, !cooling),
                        Entry::item(format!("prov:clear:{p}"), "Clear cooldown", cooling),
                    ],
                )
            })
            .collect();
        vec![
            Entry::item(
                "status",
                if cooling {
                    "Groq back at 04:30"
                } else {
                    "Serving"
                },
                false,
            ),
            Entry::separator(),
            Entry::sub("providers", "Providers", subs),
            Entry::item("quit", "Quit", true),
        ]
    }

    #[test]
    fn a_changed_state_of_the_same_items_is_written_in_place() {
        assert!(same_items(
            &menu(true, &["groq", "codex"]),
            &menu(false, &["groq", "codex"])
        ));
        assert_ne!(menu(true, &["groq"]), menu(false, &["groq"]));
    }

    #[test]
    fn other_items_or_another_order_build_a_new_menu() {
        let two = menu(false, &["groq", "codex"]);
        assert!(!same_items(&two, &menu(false, &["codex", "groq"])));
        assert!(!same_items(&two, &menu(false, &["groq"])));
        let mut kind = two.clone();
        kind[3] = Entry::check("quit", "Quit", true, false);
        assert!(!same_items(&two, &kind));
    }
}
