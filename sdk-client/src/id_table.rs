//! Values keyed by request id, each at the position its id's low bits
//! name. The client picks its ids, so it picks one whose position is free
//! ([`IdTable::is_free`]): a lookup is then one index and one compare, with
//! no hashing and no probing.
//!
//! The table holds at most half as many values as it has positions, and
//! doubles when an insert would pass that. Ids at distinct positions stay
//! at distinct positions in a larger table (their low bits already
//! differ), so growing never makes two values collide. Once empty, a
//! table larger than [`KEPT_POSITIONS`] shrinks back to it (only then:
//! one value left in a large table keeps it large).

/// Positions of a table's first allocation.
const MIN_POSITIONS: usize = 16;

/// The most positions an emptied table keeps (20 KiB of request
/// slots): bursts of up to half as many values reuse them, and larger
/// bursts grow the table from there again.
const KEPT_POSITIONS: usize = 256;

/// Values by id; see the module's documentation.
pub(crate) struct IdTable<T> {
    /// A power of two positions (or none before the first insert).
    entries: Vec<Option<(u32, T)>>,
    len: usize,
}

impl<T> Default for IdTable<T> {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
            len: 0,
        }
    }
}

impl<T> IdTable<T> {
    /// How many values the table holds.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Where `id` lives, if the table has positions.
    fn position(&self, id: u32) -> Option<usize> {
        let positions = self.entries.len();
        (positions > 0).then(|| id as usize & (positions - 1))
    }

    /// Whether `id`'s position holds no value: an insert of `id` may come.
    pub(crate) fn is_free(&self, id: u32) -> bool {
        self.position(id)
            .is_none_or(|at| self.entries[at].is_none())
    }

    /// The value of `id`.
    pub(crate) fn get(&self, id: u32) -> Option<&T> {
        match self.entries.get(self.position(id)?)? {
            Some((key, value)) if *key == id => Some(value),
            _ => None,
        }
    }

    /// The value of `id`, to change.
    pub(crate) fn get_mut(&mut self, id: u32) -> Option<&mut T> {
        let at = self.position(id)?;
        match &mut self.entries[at] {
            Some((key, value)) if *key == id => Some(value),
            _ => None,
        }
    }

    /// Stores `value` for `id`, whose position must be free
    /// ([`is_free`](Self::is_free)); grows the table first when it is half
    /// full.
    pub(crate) fn insert(&mut self, id: u32, value: T) {
        if (self.len + 1) * 2 > self.entries.len() {
            self.resize((self.entries.len() * 2).max(MIN_POSITIONS));
        }
        let at = id as usize & (self.entries.len() - 1);
        debug_assert!(self.entries[at].is_none(), "id {id}'s position is taken");
        self.entries[at] = Some((id, value));
        self.len += 1;
    }

    /// Takes `id`'s value out.
    pub(crate) fn remove(&mut self, id: u32) -> Option<T> {
        let at = self.position(id)?;
        if !matches!(&self.entries[at], Some((key, _)) if *key == id) {
            return None;
        }
        let (_, value) = self.entries[at].take()?;
        self.len -= 1;
        if self.len == 0 && self.entries.len() > KEPT_POSITIONS {
            // Every position is empty: the first ones are the smaller table.
            self.entries.truncate(KEPT_POSITIONS);
            self.entries.shrink_to_fit();
        }
        Some(value)
    }

    /// Every value, to change.
    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.entries
            .iter_mut()
            .filter_map(|entry| entry.as_mut().map(|(_, value)| value))
    }

    /// Moves every value into a table of `positions` positions.
    fn resize(&mut self, positions: usize) {
        let old = std::mem::replace(
            &mut self.entries,
            std::iter::repeat_with(|| None).take(positions).collect(),
        );
        for (id, value) in old.into_iter().flatten() {
            let at = id as usize & (positions - 1);
            self.entries[at] = Some((id, value));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_finds_only_its_own_value() {
        let mut table = IdTable::default();
        assert!(table.is_free(1));
        assert!(table.get(1).is_none());
        table.insert(1, "one");
        assert_eq!(table.get(1), Some(&"one"));
        // Same low bits, another id: not found, and its position is taken.
        let twin = 1 + MIN_POSITIONS as u32;
        assert!(table.get(twin).is_none());
        assert!(!table.is_free(twin));
        assert!(table.remove(twin).is_none());
        assert_eq!(table.len(), 1);
        *table.get_mut(1).unwrap() = "uno";
        assert_eq!(table.remove(1), Some("uno"));
        assert!(table.is_free(twin));
        assert_eq!(table.len(), 0);
    }

    #[test]
    fn growing_keeps_every_value_at_its_id() {
        let mut table = IdTable::default();
        // Ids with gaps, as `free_id` skips taken positions.
        let ids: Vec<u32> = (0..1_000u32).map(|i| i * 3 + 7).collect();
        for &id in &ids {
            assert!(table.is_free(id), "id {id}");
            table.insert(id, id * 2);
            assert!(table.len() * 2 <= table.entries.len());
        }
        for &id in &ids {
            assert_eq!(table.get(id), Some(&(id * 2)));
        }
        assert_eq!(table.values_mut().count(), ids.len());
    }

    #[test]
    fn an_emptied_large_table_shrinks_back_to_the_kept_size() {
        let mut table = IdTable::default();
        for id in 1..=200 {
            table.insert(id, 0u64);
        }
        assert!(table.entries.len() > KEPT_POSITIONS);
        for id in 1..200 {
            assert_eq!(table.remove(id), Some(0));
        }
        // One value left keeps the table as it is.
        assert!(table.entries.len() > KEPT_POSITIONS);
        assert_eq!(table.remove(200), Some(0));
        assert_eq!(table.entries.len(), KEPT_POSITIONS);
        assert!(table.entries.capacity() <= KEPT_POSITIONS + KEPT_POSITIONS / 8);
        // The smaller table takes new values at their positions.
        for id in 1_000..1_100 {
            assert!(table.is_free(id));
            table.insert(id, u64::from(id));
        }
        assert_eq!(table.entries.len(), KEPT_POSITIONS);
        assert_eq!(table.get(1_050), Some(&1_050));
    }
}
