//! The per-agreement state of one process, by agreement id: a vector sorted by id.
//!
//! ERA keeps few agreements at once (with §4's garbage collection, the ones in flight and the
//! decided ones not yet collected), and new ids arrive in increasing order, so a sorted vector
//! beats a B-tree here: appending is O(1), a lookup is a binary search over a handful of
//! entries in one or two cache lines, and nothing is allocated once the vector has grown.

/// The name of one agreement inside a group: its position in the sequence of agreements.
pub type AgreeId = u64;

/// A map from agreement id to `T`, sorted by id.
#[derive(Clone, Debug)]
pub struct IdMap<T>(Vec<(AgreeId, T)>);

impl<T> Default for IdMap<T> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<T> IdMap<T> {
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn find(&self, id: AgreeId) -> Result<usize, usize> {
        // The newest id is the likeliest: check the end first.
        match self.0.last() {
            Some(&(last, _)) if last < id => Err(self.0.len()),
            Some(&(last, _)) if last == id => Ok(self.0.len() - 1),
            _ => self.0.binary_search_by_key(&id, |e| e.0),
        }
    }

    pub fn get(&self, id: &AgreeId) -> Option<&T> {
        self.find(*id).ok().map(|i| &self.0[i].1)
    }

    pub fn get_mut(&mut self, id: &AgreeId) -> Option<&mut T> {
        self.find(*id).ok().map(|i| &mut self.0[i].1)
    }

    /// The entry of `id`, made with `make` if absent.
    pub fn get_or_insert_with(&mut self, id: AgreeId, make: impl FnOnce() -> T) -> &mut T {
        let i = match self.find(id) {
            Ok(i) => i,
            Err(i) => {
                self.0.insert(i, (id, make()));
                i
            }
        };
        &mut self.0[i].1
    }

    /// Sets the entry of `id`; the entry it replaced, if any.
    pub fn insert(&mut self, id: AgreeId, value: T) -> Option<T> {
        match self.find(id) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, value)),
            Err(i) => {
                self.0.insert(i, (id, value));
                None
            }
        }
    }

    /// Keeps the entries for which `keep` holds.
    pub fn retain(&mut self, mut keep: impl FnMut(&AgreeId, &mut T) -> bool) {
        self.0.retain_mut(|(id, v)| keep(id, v));
    }

    /// The smallest id.
    pub fn first_key(&self) -> Option<AgreeId> {
        self.0.first().map(|e| e.0)
    }

    /// The entries in increasing id order.
    pub fn iter(&self) -> impl Iterator<Item = (&AgreeId, &T)> {
        self.0.iter().map(|(id, v)| (id, v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behaves_as_a_sorted_map_against_btreemap() {
        let mut rng = crate::protocol::rng::ProtoRng::new(3);
        let mut ours = IdMap::default();
        let mut reference = std::collections::BTreeMap::new();
        for step in 0..20_000u64 {
            // Mostly increasing ids near the end, as ERA's; sometimes anywhere below.
            let id = match rng.below(4) {
                0 => rng.next_u64() % (step / 8 + 1),
                _ => step / 4 + u64::from(rng.below(3)),
            };
            match rng.below(5) {
                0 => {
                    assert_eq!(ours.insert(id, step), reference.insert(id, step));
                }
                1 => {
                    *ours.get_or_insert_with(id, || step) += 1;
                    *reference.entry(id).or_insert(step) += 1;
                }
                2 => {
                    let floor = step / 5;
                    ours.retain(|&k, v| k >= floor || *v % 2 == 0);
                    reference.retain(|&k, v| k >= floor || *v % 2 == 0);
                }
                3 => {
                    if let (Some(a), Some(b)) = (ours.get_mut(&id), reference.get_mut(&id)) {
                        *a += 3;
                        *b += 3;
                    }
                }
                _ => assert_eq!(ours.get(&id), reference.get(&id)),
            }
            assert_eq!(ours.len(), reference.len());
            assert_eq!(ours.first_key(), reference.keys().next().copied());
        }
        assert!(
            ours.iter()
                .map(|(k, v)| (*k, *v))
                .eq(reference.iter().map(|(k, v)| (*k, *v)))
        );
        assert!(!ours.is_empty());
    }
}
