//! Values kept by type: the store on each connection (what a handler keeps
//! between requests, a user after login, a nickname), and the
//! application's shared state that the server hands to every handler.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::sync::lock;

/// Values kept on one connection, one per type. It lives as long as the
/// connection. Every method takes a short lock; none is held across an `.await`.
#[derive(Default)]
pub struct ConnectionStore {
    values: Mutex<HashMap<TypeId, Box<dyn Any + Send + Sync>>>,
}

impl std::fmt::Debug for ConnectionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionStore")
            .field("values", &self.values().len())
            .finish()
    }
}

impl ConnectionStore {
    fn values(&self) -> MutexGuard<'_, HashMap<TypeId, Box<dyn Any + Send + Sync>>> {
        lock(&self.values)
    }

    /// Stores `value`, returning the value of the same type it replaces.
    pub fn insert<T: Send + Sync + 'static>(&self, value: T) -> Option<T> {
        self.values()
            .insert(TypeId::of::<T>(), Box::new(value))
            .and_then(|old| old.downcast().ok().map(|old| *old))
    }

    /// A copy of the stored value of type `T`.
    pub fn get<T: Clone + Send + Sync + 'static>(&self) -> Option<T> {
        self.values()
            .get(&TypeId::of::<T>())
            .and_then(|value| value.downcast_ref::<T>())
            .cloned()
    }

    /// Runs `f` on the stored value of type `T`, if any, in place.
    pub fn with<T: Send + Sync + 'static, R>(&self, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        self.values()
            .get_mut(&TypeId::of::<T>())
            .and_then(|value| value.downcast_mut::<T>())
            .map(f)
    }

    /// Removes and returns the stored value of type `T`.
    pub fn remove<T: Send + Sync + 'static>(&self) -> Option<T> {
        self.values()
            .remove(&TypeId::of::<T>())
            .and_then(|value| value.downcast().ok().map(|value| *value))
    }

    /// Whether a value of type `T` is stored.
    pub fn contains<T: 'static>(&self) -> bool {
        self.values().contains_key(&TypeId::of::<T>())
    }
}

/// Values shared by every handler, by type: what `.state(value)` stored.
#[derive(Default)]
pub(crate) struct AppState {
    values: HashMap<TypeId, Arc<dyn Any + Send + Sync>>,
}

impl AppState {
    pub(crate) fn insert<T: Send + Sync + 'static>(&mut self, value: Arc<T>) {
        self.values.insert(TypeId::of::<T>(), value);
    }

    pub(crate) fn get<T: Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        let value = self.values.get(&TypeId::of::<T>())?;
        Arc::clone(value).downcast().ok()
    }

    pub(crate) fn contains<T: 'static>(&self) -> bool {
        self.values.contains_key(&TypeId::of::<T>())
    }
}
