//! A client's config file as a tree that can be edited key by key while every other byte stays
//! as it was: comments, order, indentation, line endings. JSON and JSONC go through dprint's
//! concrete-syntax tree (`jsonc-parser`), TOML through `toml_edit`; both are the maintained
//! crates that exist for exactly this, so nothing here re-implements a parser. A `.env` file
//! (Gemini CLI's `~/.gemini/.env`) is lines of `NAME=value`, edited line by line.

use jsonc_parser::cst::{CstInputValue, CstObject, CstRootNode};
use serde_json::Value;

/// The formats client config files come in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// JSON that may hold comments and trailing commas (Claude Code's `settings.json` is read
    /// leniently; opencode documents `opencode.jsonc`).
    Json,
    Toml,
    /// `NAME=value` lines, as dotenv reads them.
    Env,
}

/// A value to write, its object keys in the order they are written.
#[derive(Clone, Debug, PartialEq)]
pub enum Val {
    Str(String),
    Bool(bool),
    Obj(Vec<(String, Val)>),
    /// Anything else, as JSON (a prior value being put back).
    Json(Value),
}

impl Val {
    pub fn str(s: impl Into<String>) -> Self {
        Val::Str(s.into())
    }

    pub fn obj<const N: usize>(fields: [(&str, Val); N]) -> Self {
        Val::Obj(
            fields
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        )
    }

    /// The same value as JSON (what it is compared with).
    pub fn to_json(&self) -> Value {
        match self {
            Val::Str(s) => Value::String(s.clone()),
            Val::Bool(b) => Value::Bool(*b),
            Val::Obj(f) => Value::Object(f.iter().map(|(k, v)| (k.clone(), v.to_json())).collect()),
            Val::Json(v) => v.clone(),
        }
    }

    fn to_cst(&self) -> CstInputValue {
        match self {
            Val::Str(s) => CstInputValue::String(s.clone()),
            Val::Bool(b) => CstInputValue::Bool(*b),
            Val::Obj(f) => {
                CstInputValue::Object(f.iter().map(|(k, v)| (k.clone(), v.to_cst())).collect())
            }
            Val::Json(v) => json_to_cst(v),
        }
    }
}

fn json_to_cst(v: &Value) -> CstInputValue {
    match v {
        Value::Null => CstInputValue::Null,
        Value::Bool(b) => CstInputValue::Bool(*b),
        Value::Number(n) => CstInputValue::Number(n.to_string()),
        Value::String(s) => CstInputValue::String(s.clone()),
        Value::Array(a) => CstInputValue::Array(a.iter().map(json_to_cst).collect()),
        Value::Object(m) => {
            CstInputValue::Object(m.iter().map(|(k, v)| (k.clone(), json_to_cst(v))).collect())
        }
    }
}

/// Why a file cannot be edited safely.
#[derive(Debug, thiserror::Error)]
pub enum DocError {
    #[error("it is not valid {format}: {detail}")]
    Syntax {
        format: &'static str,
        detail: String,
    },
    #[error("its top level is not {what}")]
    NotATable { what: &'static str },
    #[error("`{key}` is not {what}, so Baton cannot add its entry under it")]
    InTheWay { key: String, what: &'static str },
}

/// One parsed file.
pub enum Doc {
    Json(CstRootNode),
    Toml(toml_edit::DocumentMut),
    Env(Vec<String>),
}

impl Doc {
    /// Parses `text`; an empty (or all-blank) file is an empty document.
    pub fn parse(format: Format, text: &str) -> Result<Self, DocError> {
        match format {
            Format::Json => {
                let src = if text.trim().is_empty() { "{}\n" } else { text };
                let root =
                    CstRootNode::parse(src, &Default::default()).map_err(|e| DocError::Syntax {
                        format: "JSON",
                        detail: e.to_string(),
                    })?;
                if root.object_value().is_none() {
                    return Err(DocError::NotATable {
                        what: "a JSON object",
                    });
                }
                Ok(Doc::Json(root))
            }
            Format::Toml => text
                .parse::<toml_edit::DocumentMut>()
                .map(Doc::Toml)
                .map_err(|e| DocError::Syntax {
                    format: "TOML",
                    detail: e.to_string().trim().replace('\n', " "),
                }),
            Format::Env => Ok(Doc::Env(text.lines().map(str::to_string).collect())),
        }
    }

    /// The value at `path`, as JSON.
    pub fn get(&self, path: &[&str]) -> Option<Value> {
        match self {
            Doc::Json(root) => {
                let (last, parents) = path.split_last()?;
                let mut obj = root.object_value()?;
                for p in parents {
                    obj = obj.object_value(p)?;
                }
                obj.get(last)?.to_serde_value()
            }
            Doc::Toml(doc) => {
                let mut item = doc.as_item();
                for p in path {
                    item = item.as_table_like()?.get(p)?;
                }
                toml_to_json(item)
            }
            Doc::Env(lines) => match path {
                [name] => lines
                    .iter()
                    .rev()
                    .find_map(|l| env_entry(l).filter(|(n, _)| n == name))
                    .map(|(_, v)| Value::String(v)),
                _ => None,
            },
        }
    }

    /// Sets (or with `None` removes) the value at `path`, creating parent objects as needed.
    pub fn set(&mut self, path: &[&str], value: Option<&Val>) -> Result<(), DocError> {
        let Some((last, parents)) = path.split_last() else {
            return Ok(());
        };
        match self {
            Doc::Json(root) => {
                let obj = root.object_value().ok_or(DocError::NotATable {
                    what: "a JSON object",
                })?;
                let Some(obj) = json_parent(obj, parents, value.is_some())? else {
                    return Ok(());
                };
                match (obj.get(last), value) {
                    (Some(prop), Some(v)) => prop.set_value(v.to_cst()),
                    (None, Some(v)) => {
                        obj.append(last, v.to_cst());
                    }
                    (Some(prop), None) => prop.remove(),
                    (None, None) => {}
                }
                Ok(())
            }
            Doc::Toml(doc) => toml_set(doc.as_item_mut(), parents, last, value),
            Doc::Env(lines) => {
                if !parents.is_empty() {
                    return Err(DocError::InTheWay {
                        key: parents.join("."),
                        what: "a name a .env file can hold",
                    });
                }
                let line = match value {
                    Some(Val::Str(v)) => Some(format!("{last}={}", env_quote(v))),
                    Some(other) => Some(format!(
                        "{last}={}",
                        env_quote(&other.to_json().to_string())
                    )),
                    None => None,
                };
                let at = lines
                    .iter()
                    .rposition(|l| env_entry(l).is_some_and(|(n, _)| n == *last));
                match (at, line) {
                    (Some(i), Some(l)) => lines[i] = l,
                    (Some(i), None) => {
                        lines.remove(i);
                    }
                    (None, Some(l)) => lines.push(l),
                    (None, None) => {}
                }
                Ok(())
            }
        }
    }

    /// The file's text after the edits.
    pub fn render(&self) -> String {
        match self {
            Doc::Json(root) => root.to_string(),
            Doc::Toml(doc) => doc.to_string(),
            Doc::Env(lines) if lines.is_empty() => String::new(),
            Doc::Env(lines) => format!("{}\n", lines.join("\n")),
        }
    }
}

/// A `.env` line's name and value (`export NAME=value`, quotes taken off), or `None` for a
/// comment, a blank line or anything else.
fn env_entry(line: &str) -> Option<(String, String)> {
    let line = line.trim_start();
    let line = line.strip_prefix("export ").unwrap_or(line);
    let (name, value) = line.split_once('=')?;
    let name = name.trim();
    if name.is_empty() || name.starts_with('#') || name.contains(char::is_whitespace) {
        return None;
    }
    let value = value.trim();
    let unquoted = ['"', '\'']
        .iter()
        .find_map(|q| value.strip_prefix(*q).and_then(|v| v.strip_suffix(*q)));
    let value = match unquoted {
        Some(v) => v.to_string(),
        // An unquoted value ends at a comment.
        None => value.split(" #").next().unwrap_or("").trim().to_string(),
    };
    Some((name.to_string(), value))
}

/// A value as a `.env` line holds it: bare when it is plain, else in double quotes.
fn env_quote(v: &str) -> String {
    let plain = v
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_./:@+,".contains(c));
    if plain && !v.is_empty() {
        v.to_string()
    } else {
        format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""))
    }
}

/// The object at `parents` under `obj`, created when `create` (else `None` when missing).
fn json_parent(
    mut obj: CstObject,
    parents: &[&str],
    create: bool,
) -> Result<Option<CstObject>, DocError> {
    for p in parents {
        obj = match obj.get(p) {
            Some(prop) => match prop.object_value() {
                Some(o) => o,
                None if create && prop.to_serde_value() == Some(Value::Null) => {
                    prop.object_value_or_set()
                }
                None => {
                    return Err(DocError::InTheWay {
                        key: (*p).to_string(),
                        what: "an object",
                    })
                }
            },
            None if create => obj.object_value_or_set(p),
            None => return Ok(None),
        };
    }
    Ok(Some(obj))
}

fn toml_set(
    root: &mut toml_edit::Item,
    parents: &[&str],
    last: &str,
    value: Option<&Val>,
) -> Result<(), DocError> {
    use toml_edit::Item;
    let mut item: &mut Item = root;
    for p in parents {
        let table = item.as_table_like_mut().ok_or_else(|| DocError::InTheWay {
            key: (*p).to_string(),
            what: "a table",
        })?;
        if table.get(p).is_none() {
            if value.is_none() {
                return Ok(());
            }
            let mut t = toml_edit::Table::new();
            t.set_implicit(true);
            table.insert(p, Item::Table(t));
        }
        item = table.get_mut(p).unwrap_or_else(|| unreachable!());
        if item.as_table_like().is_none() {
            return Err(DocError::InTheWay {
                key: (*p).to_string(),
                what: "a table",
            });
        }
    }
    let parent_is_table = item.is_table();
    let Some(table) = item.as_table_like_mut() else {
        return Ok(());
    };
    let Some(v) = value else {
        table.remove(last);
        return Ok(());
    };
    let is_table = table.get(last).is_some_and(|i| i.is_table()) || table.get(last).is_none();
    let new = match v {
        // A whole object under a table gets its own header ([model_providers.baton]) unless
        // the user wrote it inline.
        Val::Obj(fields) if is_table && parent_is_table && !table.is_dotted() => {
            let mut sub = toml_edit::Table::new();
            for (k, f) in fields {
                sub.insert(k, Item::Value(toml_value(f)));
            }
            Item::Table(sub)
        }
        v => Item::Value(toml_value(v)),
    };
    match table.get_mut(last) {
        // Replaced in place: the comments around the old entry stay where they were.
        Some(slot) => *slot = with_decor_of(slot, new),
        None => {
            table.insert(last, new);
        }
    }
    Ok(())
}

/// `new` carrying the comments and spacing of `old` (a value's prefix and suffix, a table's
/// header decoration and position).
fn with_decor_of(old: &toml_edit::Item, mut new: toml_edit::Item) -> toml_edit::Item {
    use toml_edit::Item;
    match (old, &mut new) {
        (Item::Value(o), Item::Value(n)) => *n.decor_mut() = o.decor().clone(),
        (Item::Table(o), Item::Table(n)) => {
            *n.decor_mut() = o.decor().clone();
            if let Some(p) = o.position() {
                n.set_position(Some(p));
            }
        }
        _ => {}
    }
    new
}

fn toml_value(v: &Val) -> toml_edit::Value {
    match v {
        Val::Str(s) => s.as_str().into(),
        Val::Bool(b) => (*b).into(),
        Val::Obj(fields) => {
            let mut t = toml_edit::InlineTable::new();
            for (k, f) in fields {
                t.insert(k, toml_value(f));
            }
            toml_edit::Value::InlineTable(t)
        }
        Val::Json(j) => json_to_toml(j),
    }
}

fn json_to_toml(v: &Value) -> toml_edit::Value {
    match v {
        Value::Bool(b) => (*b).into(),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.into(),
            None => n.as_f64().unwrap_or_default().into(),
        },
        Value::String(s) => s.as_str().into(),
        Value::Array(a) => toml_edit::Value::Array(a.iter().map(json_to_toml).collect()),
        Value::Object(m) => {
            let mut t = toml_edit::InlineTable::new();
            for (k, f) in m {
                t.insert(k, json_to_toml(f));
            }
            toml_edit::Value::InlineTable(t)
        }
        // TOML has no null: a prior "null" was never a TOML value.
        Value::Null => "".into(),
    }
}

fn toml_to_json(item: &toml_edit::Item) -> Option<Value> {
    use toml_edit::Item;
    match item {
        Item::None => None,
        Item::Value(v) => Some(toml_value_json(v)),
        Item::Table(t) => Some(Value::Object(
            t.iter()
                .filter_map(|(k, i)| Some((k.to_string(), toml_to_json(i)?)))
                .collect(),
        )),
        Item::ArrayOfTables(a) => Some(Value::Array(
            a.iter()
                .map(|t| toml_to_json(&Item::Table(t.clone())).unwrap_or(Value::Null))
                .collect(),
        )),
    }
}

fn toml_value_json(v: &toml_edit::Value) -> Value {
    use toml_edit::Value as V;
    match v {
        V::String(s) => Value::String(s.value().clone()),
        V::Integer(i) => Value::from(*i.value()),
        V::Float(f) => serde_json::Number::from_f64(*f.value()).map_or(Value::Null, Value::Number),
        V::Boolean(b) => Value::Bool(*b.value()),
        V::Datetime(d) => Value::String(d.value().to_string()),
        V::Array(a) => Value::Array(a.iter().map(toml_value_json).collect()),
        V::InlineTable(t) => Value::Object(
            t.iter()
                .map(|(k, v)| (k.to_string(), toml_value_json(v)))
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests;
