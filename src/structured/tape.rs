//! An answer's JSON read into one flat vector (a tape) for the schema validator to walk, in
//! place of a `serde_json::Value` tree. A tree costs an allocation per key, per escaped
//! string and per map node, and as much again to drop; the tape is one vector, its strings
//! borrowed from the answer's text unless they hold escapes. `jsonschema` validates any
//! representation that implements its `Json` traits, so the validator itself is the crate's.
//!
//! A value on the tape is one token, a container its header followed by its contents: an
//! array's elements, an object's members as key then value. Each header knows where its
//! contents end, so a value is skipped in one step. An object's members are found by a scan,
//! or, past [`SCANNED`] members, by a binary search in a sorted index (an answer with a
//! hundred thousand keys and a schema naming thousands stays linear-logarithmic). When a key
//! appears twice, the last one counts, as `serde_json` and `JSON.parse` read it: such a value
//! is read through `serde_json`'s tree, which keeps only the last, onto the tape.

use std::borrow::Cow;
use std::fmt;

use jsonschema::json::{Array, Json, Node, NodeIdentity, Object};
use jsonschema::JsonType;
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Number, Value};

/// Objects with more members than this get a sorted index for lookups.
const SCANNED: usize = 16;

/// One token of the tape.
enum Tok<'t> {
    Null,
    Bool(bool),
    Num(Number),
    Str(Cow<'t, str>),
    /// Its `len` members follow, key then value, up to (not including) the token at `end`;
    /// `index` is where its sorted keys start in [`Tape::sorted`] (`usize::MAX`: none).
    Obj {
        len: usize,
        end: usize,
        index: usize,
    },
    /// Its `len` elements follow, up to the token at `end`.
    Arr {
        len: usize,
        end: usize,
    },
}

/// One JSON value read from text, borrowing the text's unescaped strings.
pub struct Tape<'t> {
    toks: Vec<Tok<'t>>,
    /// Large objects' members as the positions of their keys, sorted by key (ties by position).
    sorted: Vec<usize>,
}

impl<'t> Tape<'t> {
    /// `text` as one JSON value (whitespace around it allowed), or why it is not one.
    pub fn read(text: &'t str) -> Result<Tape<'t>, serde_json::Error> {
        // About one token per five bytes of an answer's JSON: one allocation, seldom two.
        let mut toks = Vec::with_capacity(text.len() / 5 + 1);
        let mut de = serde_json::Deserializer::from_str(text);
        Fill(&mut toks).deserialize(&mut de)?;
        de.end()?;
        let mut tape = Tape {
            toks,
            sorted: Vec::new(),
        };
        if tape.index() {
            // A repeated key: rare, and `serde_json` knows which one counts.
            let v: Value = serde_json::from_str(text)?;
            let mut toks = Vec::new();
            put(&mut toks, &v);
            let mut once = Tape {
                toks,
                sorted: Vec::new(),
            };
            once.index();
            return Ok(once);
        }
        Ok(tape)
    }

    /// The value as the validator sees it.
    pub fn root(&self) -> At<'_> {
        At { tape: self, i: 0 }
    }

    /// Builds the sorted key index of every object past [`SCANNED`] members; whether any
    /// object repeats a key.
    fn index(&mut self) -> bool {
        let mut repeats = false;
        for i in 0..self.toks.len() {
            let Tok::Obj { len, .. } = self.toks[i] else {
                continue;
            };
            let toks = &self.toks;
            if len <= SCANNED {
                // Pairs compared by a word of each key first (its length and first bytes).
                let mut marks = [(0u64, 0usize); SCANNED];
                for (m, k) in marks.iter_mut().zip(members(toks, i)) {
                    *m = (mark(key(toks, k)), k);
                }
                let marks = &marks[..len];
                for (n, (m, k)) in marks.iter().enumerate() {
                    repeats |= marks[n + 1..]
                        .iter()
                        .any(|(o, j)| o == m && key(toks, *j) == key(toks, *k));
                }
                continue;
            }
            let start = self.sorted.len();
            self.sorted.extend(members(toks, i));
            let sorted = &mut self.sorted[start..];
            sorted.sort_by(|a, b| key(toks, *a).cmp(key(toks, *b)).then(a.cmp(b)));
            repeats |= sorted
                .windows(2)
                .any(|w| key(toks, w[0]) == key(toks, w[1]));
            if let Tok::Obj { index, .. } = &mut self.toks[i] {
                *index = start;
            }
        }
        repeats
    }
}

/// A word of `name`: its length and up to its first seven bytes (equal names, equal words).
fn mark(name: &str) -> u64 {
    let b = name.as_bytes();
    let mut w = [0u8; 8];
    let n = b.len().min(7);
    w[..n].copy_from_slice(&b[..n]);
    w[7] = b.len() as u8;
    u64::from_le_bytes(w)
}

/// `v` onto the tape, its strings copied.
fn put(toks: &mut Vec<Tok<'_>>, v: &Value) {
    let at = toks.len();
    match v {
        Value::Null => toks.push(Tok::Null),
        Value::Bool(b) => toks.push(Tok::Bool(*b)),
        Value::Number(n) => toks.push(Tok::Num(n.clone())),
        Value::String(s) => toks.push(Tok::Str(Cow::Owned(s.clone()))),
        Value::Array(a) => {
            toks.push(Tok::Null);
            a.iter().for_each(|e| put(toks, e));
            toks[at] = Tok::Arr {
                len: a.len(),
                end: toks.len(),
            };
        }
        Value::Object(o) => {
            toks.push(Tok::Null);
            for (k, e) in o {
                toks.push(Tok::Str(Cow::Owned(k.clone())));
                put(toks, e);
            }
            toks[at] = Tok::Obj {
                len: o.len(),
                end: toks.len(),
                index: usize::MAX,
            };
        }
    }
}

/// Where the value starting at `i` ends (the position past it).
fn past(toks: &[Tok<'_>], i: usize) -> usize {
    match toks.get(i) {
        Some(Tok::Obj { end, .. } | Tok::Arr { end, .. }) => *end,
        _ => i + 1,
    }
}

/// The key at position `k` (a string token; "" should the tape be read wrong).
fn key<'a>(toks: &'a [Tok<'_>], k: usize) -> &'a str {
    match toks.get(k) {
        Some(Tok::Str(s)) => s,
        _ => "",
    }
}

/// The positions of the keys of the object at `i`.
fn members<'a>(toks: &'a [Tok<'a>], i: usize) -> Keys<'a> {
    Keys {
        toks,
        next: i + 1,
        end: past(toks, i),
    }
}

/// An object's keys' positions, in order.
#[derive(Clone)]
struct Keys<'a> {
    toks: &'a [Tok<'a>],
    next: usize,
    end: usize,
}

impl Iterator for Keys<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        (self.next < self.end).then(|| {
            let k = self.next;
            self.next = past(self.toks, k + 1);
            k
        })
    }
}

/// Reads one JSON value onto the tape (serde drives it; `serde_json` bounds the nesting).
struct Fill<'v, 't>(&'v mut Vec<Tok<'t>>);

impl<'de> DeserializeSeed<'de> for Fill<'_, 'de> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Fill<'_, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<(), E> {
        self.0.push(Tok::Bool(b));
        Ok(())
    }

    fn visit_i64<E>(self, n: i64) -> Result<(), E> {
        self.0.push(Tok::Num(n.into()));
        Ok(())
    }

    fn visit_u64<E>(self, n: u64) -> Result<(), E> {
        self.0.push(Tok::Num(n.into()));
        Ok(())
    }

    fn visit_f64<E>(self, n: f64) -> Result<(), E> {
        // As `serde_json::Value` reads it: JSON text has no non-finite numbers.
        self.0.push(Number::from_f64(n).map_or(Tok::Null, Tok::Num));
        Ok(())
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<(), E> {
        self.0.push(Tok::Str(Cow::Borrowed(s)));
        Ok(())
    }

    fn visit_str<E>(self, s: &str) -> Result<(), E> {
        self.0.push(Tok::Str(Cow::Owned(s.to_owned())));
        Ok(())
    }

    fn visit_string<E>(self, s: String) -> Result<(), E> {
        self.0.push(Tok::Str(Cow::Owned(s)));
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        self.0.push(Tok::Null);
        Ok(())
    }

    fn visit_none<E>(self) -> Result<(), E> {
        self.0.push(Tok::Null);
        Ok(())
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let at = self.0.len();
        self.0.push(Tok::Arr { len: 0, end: 0 });
        let mut n = 0;
        while seq.next_element_seed(Fill(&mut *self.0))?.is_some() {
            n += 1;
        }
        let end = self.0.len();
        self.0[at] = Tok::Arr { len: n, end };
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let at = self.0.len();
        self.0.push(Tok::Obj {
            len: 0,
            end: 0,
            index: usize::MAX,
        });
        let mut n = 0;
        while map.next_key_seed(Fill(&mut *self.0))?.is_some() {
            map.next_value_seed(Fill(&mut *self.0))?;
            n += 1;
        }
        let end = self.0.len();
        self.0[at] = Tok::Obj {
            len: n,
            end,
            index: usize::MAX,
        };
        Ok(())
    }
}

/// The tape as `jsonschema` reads it.
pub struct Flat;

impl Json for Flat {
    type Node<'a> = At<'a>;
    type PreparedKey = Box<str>;
    type StringBuffer = ();

    // A lookup scans the members: a pass over them is cheaper as soon as it replaces two.
    const KEYS_PER_LOOKUP: usize = 2;
    const ACYCLIC: bool = true;

    fn prepare_key(key: &str) -> Box<str> {
        key.into()
    }

    fn with_string_node<T>((): &mut (), string: &str, f: impl FnOnce(At<'_>) -> T) -> T {
        let tape = Tape {
            toks: vec![Tok::Str(Cow::Borrowed(string))],
            sorted: Vec::new(),
        };
        f(tape.root())
    }
}

/// One value on a tape.
#[derive(Clone, Copy)]
pub struct At<'a> {
    tape: &'a Tape<'a>,
    i: usize,
}

impl<'a> At<'a> {
    fn tok(&self) -> Option<&'a Tok<'a>> {
        self.tape.toks.get(self.i)
    }

    fn at(&self, i: usize) -> At<'a> {
        At { tape: self.tape, i }
    }

    /// The value as a `serde_json` tree (for errors, `const` and `enum`: cold paths).
    fn value(&self) -> Value {
        match self.tok() {
            None | Some(Tok::Null) => Value::Null,
            Some(Tok::Bool(b)) => Value::Bool(*b),
            Some(Tok::Num(n)) => Value::Number(n.clone()),
            Some(Tok::Str(s)) => Value::String(s.to_string()),
            Some(Tok::Arr { .. }) => Value::Array(self.elements().map(|e| e.value()).collect()),
            Some(Tok::Obj { .. }) => Value::Object(
                members(&self.tape.toks, self.i)
                    .map(|k| (key(&self.tape.toks, k).to_string(), self.at(k + 1).value()))
                    .collect(),
            ),
        }
    }

    fn elements(&self) -> Elements<'a> {
        Elements {
            tape: self.tape,
            next: self.i + 1,
            end: past(&self.tape.toks, self.i),
        }
    }
}

/// An array's elements, in order.
pub struct Elements<'a> {
    tape: &'a Tape<'a>,
    next: usize,
    end: usize,
}

impl<'a> Iterator for Elements<'a> {
    type Item = At<'a>;

    fn next(&mut self) -> Option<At<'a>> {
        (self.next < self.end).then(|| {
            let i = self.next;
            self.next = past(&self.tape.toks, i);
            At { tape: self.tape, i }
        })
    }
}

/// An object's members, in order: the name and the value.
pub struct Members<'a>(Elements<'a>);

impl<'a> Iterator for Members<'a> {
    type Item = (&'a str, At<'a>);

    fn next(&mut self) -> Option<(&'a str, At<'a>)> {
        let k = self.0.next()?;
        self.0.next = past(&k.tape.toks, k.i + 1);
        Some((key(&k.tape.toks, k.i), k.at(k.i + 1)))
    }
}

impl<'a> Node<'a, Flat> for At<'a> {
    type Object = At<'a>;
    type Array = At<'a>;
    type Number = &'a Number;

    fn as_object(&self) -> Option<At<'a>> {
        matches!(self.tok(), Some(Tok::Obj { .. })).then_some(*self)
    }

    fn as_array(&self) -> Option<At<'a>> {
        matches!(self.tok(), Some(Tok::Arr { .. })).then_some(*self)
    }

    fn as_string(&self) -> Option<Cow<'a, str>> {
        match self.tok() {
            Some(Tok::Str(s)) => Some(Cow::Borrowed(s)),
            _ => None,
        }
    }

    fn as_number(&self) -> Option<&'a Number> {
        match self.tok() {
            Some(Tok::Num(n)) => Some(n),
            _ => None,
        }
    }

    fn as_boolean(&self) -> Option<bool> {
        match self.tok() {
            Some(Tok::Bool(b)) => Some(*b),
            _ => None,
        }
    }

    fn is_null(&self) -> bool {
        matches!(self.tok(), Some(Tok::Null) | None)
    }

    fn json_type(&self) -> JsonType {
        match self.tok() {
            None | Some(Tok::Null) => JsonType::Null,
            Some(Tok::Bool(_)) => JsonType::Boolean,
            Some(Tok::Num(_)) => JsonType::Number,
            Some(Tok::Str(_)) => JsonType::String,
            Some(Tok::Arr { .. }) => JsonType::Array,
            Some(Tok::Obj { .. }) => JsonType::Object,
        }
    }

    fn to_value(&self) -> Cow<'a, Value> {
        Cow::Owned(self.value())
    }

    fn identity(&self) -> Option<NodeIdentity> {
        // Each value is its own token: its address is its own while the tape lives.
        self.tok()
            .map(|t| NodeIdentity::new(std::ptr::from_ref(t) as usize))
    }
}

impl<'a> Object<'a, Flat> for At<'a> {
    type Node = At<'a>;
    type MemberName = &'a str;
    type MembersIter = Members<'a>;

    fn len(&self) -> usize {
        match self.tok() {
            Some(Tok::Obj { len, .. }) => *len,
            _ => 0,
        }
    }

    fn get(&self, name: &Box<str>) -> Option<At<'a>> {
        let toks = &self.tape.toks;
        let Some(Tok::Obj { len, index, .. }) = self.tok() else {
            return None;
        };
        if *index == usize::MAX {
            // The last of equal keys counts.
            return members(toks, self.i)
                .filter(|k| key(toks, *k) == &**name)
                .last()
                .map(|k| self.at(k + 1));
        }
        let sorted = self.tape.sorted.get(*index..*index + *len)?;
        let after = sorted.partition_point(|k| key(toks, *k) <= &**name);
        let k = *sorted.get(after.checked_sub(1)?)?;
        (key(toks, k) == &**name).then(|| self.at(k + 1))
    }

    fn members(&self) -> Members<'a> {
        Members(At::elements(self))
    }
}

impl<'a> Array<'a, Flat> for At<'a> {
    type Node = At<'a>;
    type ElementsIter = Elements<'a>;

    fn len(&self) -> usize {
        match self.tok() {
            Some(Tok::Arr { len, .. }) => *len,
            _ => 0,
        }
    }

    fn elements(&self) -> Elements<'a> {
        At::elements(self)
    }
}

#[cfg(test)]
mod tests;
