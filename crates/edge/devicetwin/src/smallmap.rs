//! A map of few entries, kept as a vector sorted by key: a device's twins.
//!
//! A `BTreeMap` allocates a whole node of eleven entries for its first one;
//! with a twin of ~160 bytes, a device of two twins cost ~2 KB, 2 MB of a
//! 1,000-device node's heap (heaptrack). Here it costs its entries. Lookups
//! are binary searches; devices have tens of twins at most (`MAX_TWINS`).

use std::borrow::Borrow;

/// A sorted map of few entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmallMap<V> {
    entries: Vec<(String, V)>,
}

impl<V> Default for SmallMap<V> {
    fn default() -> Self {
        SmallMap { entries: Vec::new() }
    }
}

impl<V> SmallMap<V> {
    fn find(&self, key: &str) -> Result<usize, usize> {
        self.entries.binary_search_by(|(k, _)| k.as_str().cmp(key))
    }

    /// Entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// No entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&V> {
        self.find(key).ok().map(|i| &self.entries[i].1)
    }

    /// The value of `key`, to change.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut V> {
        self.find(key).ok().map(|i| &mut self.entries[i].1)
    }

    /// Whether `key` has a value.
    pub fn contains_key(&self, key: &str) -> bool {
        self.find(key).is_ok()
    }

    /// Sets `key`; the value it had.
    pub fn insert(&mut self, key: String, value: V) -> Option<V> {
        match self.find(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.entries[i].1, value)),
            Err(i) => {
                self.entries.insert(i, (key, value));
                None
            }
        }
    }

    /// The value of `key`, made with `make` if there is none.
    pub fn get_or_insert_with(&mut self, key: &str, make: impl FnOnce() -> V) -> &mut V {
        let i = match self.find(key) {
            Ok(i) => i,
            Err(i) => {
                self.entries.insert(i, (key.to_owned(), make()));
                i
            }
        };
        &mut self.entries[i].1
    }

    /// Takes `key` out; its value.
    pub fn remove(&mut self, key: &str) -> Option<V> {
        self.find(key).ok().map(|i| self.entries.remove(i).1)
    }

    /// Keeps the entries `keep` says.
    pub fn retain(&mut self, mut keep: impl FnMut(&String, &mut V) -> bool) {
        self.entries.retain_mut(|(k, v)| keep(k, v));
    }

    /// The entries in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &V)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }
}

impl<'a, V> IntoIterator for &'a SmallMap<V> {
    type Item = (&'a String, &'a V);
    type IntoIter = std::iter::Map<std::slice::Iter<'a, (String, V)>, fn(&'a (String, V)) -> (&'a String, &'a V)>;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.iter().map(|(k, v)| (k, v))
    }
}

impl<V, Q: Borrow<str> + ?Sized> std::ops::Index<&Q> for SmallMap<V> {
    type Output = V;

    fn index(&self, key: &Q) -> &V {
        match self.get(key.borrow()) {
            Some(v) => v,
            None => panic!("no entry {:?}", key.borrow()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_keeps_keys_sorted_and_unique() {
        let mut m = SmallMap::default();
        assert_eq!(m.insert("b".into(), 2), None);
        assert_eq!(m.insert("a".into(), 1), None);
        assert_eq!(m.insert("c".into(), 3), None);
        assert_eq!(m.insert("b".into(), 20), Some(2));
        assert_eq!(m.iter().map(|(k, v)| (k.as_str(), *v)).collect::<Vec<_>>(), [("a", 1), ("b", 20), ("c", 3)]);
        *m.get_or_insert_with("a", || 0) += 1;
        *m.get_or_insert_with("d", || 4) += 0;
        assert_eq!((m["a"], m["d"], m.len()), (2, 4, 4));
        assert_eq!(m.remove("b"), Some(20));
        assert!(!m.contains_key("b") && m.get("b").is_none());
        m.retain(|k, _| k != "c");
        assert_eq!(m.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(), ["a", "d"]);
        if let Some(v) = m.get_mut("d") {
            *v = 40;
        }
        assert_eq!((&m).into_iter().map(|(_, v)| *v).sum::<i32>(), 42);
    }
}
