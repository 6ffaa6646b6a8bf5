//! A typed store on each connection: values a handler keeps between
//! requests (a user after login, a nickname), one per type.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use crate::context::{Context, FromContext};
use crate::sync::lock;

/// Values kept on one connection, one per type. It lives as long as the
/// connection. Every method takes a short lock; none is held across an `.await`.
#[derive(Default)]
pub struct ConnectionStore {
    values: Mutex<HashMap<TypeId, Box<dyn Any + Send + Sync>>>,
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

/// A handler parameter: a copy of the connection's stored `T`, if any.
///
/// ```
/// use ternio::{Packet, Stored, packet_controller};
///
/// #[derive(Clone)]
/// struct Nickname(String);
///
/// #[derive(Packet)]
/// #[packet(opcode = 0x0010)]
/// struct WhoAmI;
///
/// #[derive(Packet)]
/// #[packet(opcode = 0x0011)]
/// struct YouAre(Option<String>);
///
/// #[derive(Default)]
/// struct Names;
///
/// #[packet_controller]
/// impl Names {
///     fn who_am_i(_request: WhoAmI, nick: Stored<Nickname>) -> YouAre {
///         YouAre(nick.0.map(|nick| nick.0))
///     }
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored<T>(pub Option<T>);

impl<T> std::ops::Deref for Stored<T> {
    type Target = Option<T>;
    fn deref(&self) -> &Option<T> {
        &self.0
    }
}

impl<T: Clone + Send + Sync + 'static> FromContext for Stored<T> {
    fn from_context(ctx: &Context) -> Self {
        Self(ctx.store().get())
    }
}
